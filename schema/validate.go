package schema

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var (
	labelNameRE = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	portNameRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	percentRE   = regexp.MustCompile(`^[0-9]+%$`)
)

// IsDNS1123Label reports whether s is a DNS-1123 label: at most 63
// lowercase alphanumerics or '-', starting and ending alphanumeric.
func IsDNS1123Label(s string) bool {
	return len(s) <= 63 && isDNS1123Label(s)
}

// isDNS1123Label reports whether s matches ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,
// without the regexp engine: reports are validated per instance,
// thousands a second.
func isDNS1123Label(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && !isLowerAlnum(c) {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// IsDNS1123Subdomain reports whether s is a DNS-1123 subdomain: at most 253
// characters of dot-separated DNS-1123 labels.
func IsDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if !isDNS1123Label(part) {
			return false
		}
	}
	return true
}

// ReservedNodeName is the MQTT identity of the controller. No node may
// carry it: the broker grants it full access.
const ReservedNodeName = "edgeset-controller"

// NodeNameProblem explains why name cannot identify a node, or returns "".
// It is the one node-name rule, applied wherever a name enters (manifests,
// wire messages, the broker, the agent, the simulator, edgesetctl): a
// DNS-1123 subdomain (dot-separated labels of lowercase letters, digits and
// '-', each starting and ending with a letter or digit, at most 253
// characters in all) other than ReservedNodeName. Such a name is one MQTT
// topic level: it never holds a wildcard or a separator.
func NodeNameProblem(name string) string {
	switch {
	case name == "":
		return "node name is empty"
	case !IsDNS1123Subdomain(name):
		return fmt.Sprintf("invalid node name %q: must be a DNS-1123 subdomain", name)
	case name == ReservedNodeName:
		return fmt.Sprintf("invalid node name %q: reserved for the controller", name)
	}
	return ""
}

// ValidNodeName reports whether name can identify a node: NodeNameProblem
// finds nothing wrong with it.
func ValidNodeName(name string) bool { return NodeNameProblem(name) == "" }

// MQTTClientID is the MQTT client ID of node: its name with each '.' as
// '_'. Some clustered brokers refuse a '.' in a client ID (nats-server
// answers CONNACK 0x02), and a node name, a DNS-1123 subdomain, never
// holds '_', so the mapping is one to one; a name without '.' is its own
// client ID. Brokers accept either form from a node (the embedded broker
// and the NATS auth callout check it).
func MQTTClientID(node string) string { return strings.ReplaceAll(node, ".", "_") }

// LabelKeyProblem explains why k is not a valid Kubernetes label key
// ("[prefix/]name"), or returns "".
func LabelKeyProblem(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && !IsDNS1123Subdomain(prefix):
		return fmt.Sprintf("invalid label key %q: prefix must be a DNS-1123 subdomain", k)
	case len(name) > 63 || !labelNameRE.MatchString(name):
		return fmt.Sprintf("invalid label key %q: name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric", k)
	}
	return ""
}

// LabelValueProblem explains why v is not a valid label value, or returns "".
func LabelValueProblem(v string) string {
	if v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
		return fmt.Sprintf("invalid label value %q: must be empty or 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric", v)
	}
	return ""
}

// ValidateDaemonSet checks ds against every rule edgeset enforces and
// returns a *ValidationError listing every problem, each with the path of
// its field (such as "spec.template.spec.containers[0].image"), or nil.
// Unset fields that SetDefaults would fill are accepted, so it may run
// before or after defaulting. It does not modify ds.
func ValidateDaemonSet(ds *DaemonSet) error {
	var errs fieldErrors
	validateTypeMeta(&errs, ds)
	validateMetadata(&errs, &ds.Metadata)
	validateSelector(&errs, &ds.Spec)
	validatePodTemplate(&errs, "spec.template", &ds.Spec.Template, ds.APIVersion == APIVersionEdgeset)
	validateUpdateStrategy(&errs, &ds.Spec.UpdateStrategy)
	if ds.Spec.MinReadySeconds < 0 {
		errs.add("spec.minReadySeconds", "must be >= 0, not %d", ds.Spec.MinReadySeconds)
	}
	if l := ds.Spec.RevisionHistoryLimit; l != nil && *l < 0 {
		errs.add("spec.revisionHistoryLimit", "must be >= 0, not %d", *l)
	}
	validateRollout(&errs, ds)
	validateAgentDaemonSet(&errs, ds)
	return errs.err()
}

func validateTypeMeta(errs *fieldErrors, ds *DaemonSet) {
	if ds.Kind != KindDaemonSet {
		errs.add("kind", "must be %s, not %q", KindDaemonSet, ds.Kind)
	}
	if ds.APIVersion != APIVersionApps && ds.APIVersion != APIVersionEdgeset {
		errs.add("apiVersion", "must be %s or %s, not %q", APIVersionApps, APIVersionEdgeset, ds.APIVersion)
	}
}

func validateMetadata(errs *fieldErrors, m *ObjectMeta) {
	switch {
	case m.Name == "":
		errs.add("metadata.name", "required")
	case !IsDNS1123Subdomain(m.Name):
		errs.add("metadata.name", "invalid name %q: must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', at most 253 characters)", m.Name)
	}
	if m.Namespace != "" && !IsDNS1123Label(m.Namespace) {
		errs.add("metadata.namespace", "invalid namespace %q: must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)", m.Namespace)
	}
	validateLabels(errs, "metadata.labels", m.Labels)
	validateAnnotations(errs, "metadata.annotations", m.Annotations)
}

func validateLabels(errs *fieldErrors, field string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if p := LabelKeyProblem(k); p != "" {
			errs.add(field+"["+k+"]", "%s", p)
		}
		if p := LabelValueProblem(labels[k]); p != "" {
			errs.add(field+"["+k+"]", "%s", p)
		}
	}
}

func validateAnnotations(errs *fieldErrors, field string, ann map[string]string) {
	for _, k := range sortedKeys(ann) {
		if p := LabelKeyProblem(k); p != "" {
			errs.add(field+"["+k+"]", "%s", strings.Replace(p, "label key", "annotation key", 1))
		}
	}
}

func validateSelector(errs *fieldErrors, spec *DaemonSetSpec) {
	sel := spec.Selector
	if sel == nil {
		errs.add("spec.selector", "required")
		return
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		errs.add("spec.selector", "empty selector: it must select the template's labels with matchLabels or matchExpressions")
		return
	}
	validateLabels(errs, "spec.selector.matchLabels", sel.MatchLabels)
	valid := true
	for i, r := range sel.MatchExpressions {
		valid = validateLabelRequirement(errs, fmt.Sprintf("spec.selector.matchExpressions[%d]", i), r) && valid
	}
	if valid && !sel.Matches(spec.Template.Metadata.Labels) {
		errs.add("spec.template.metadata.labels", "selector does not match template labels: spec.selector must select them")
	}
}

func validateLabelRequirement(errs *fieldErrors, field string, r LabelSelectorRequirement) bool {
	n := len(*errs)
	if p := LabelKeyProblem(r.Key); p != "" {
		errs.add(field+".key", "%s", p)
	}
	switch r.Operator {
	case LabelOpIn, LabelOpNotIn:
		if len(r.Values) == 0 {
			errs.add(field+".values", "must be non-empty for operator %s", r.Operator)
		}
	case LabelOpExists, LabelOpDoesNotExist:
		if len(r.Values) > 0 {
			errs.add(field+".values", "must be empty for operator %s", r.Operator)
		}
	default:
		errs.add(field+".operator", "unsupported operator %q: want In, NotIn, Exists or DoesNotExist", r.Operator)
	}
	for j, v := range r.Values {
		if p := LabelValueProblem(v); p != "" {
			errs.add(fmt.Sprintf("%s.values[%d]", field, j), "%s", p)
		}
	}
	return len(*errs) == n
}

// Matches reports whether labels satisfy every matchLabels entry and every
// matchExpressions requirement of s. A nil selector matches nothing.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		v, ok := labels[r.Key]
		switch r.Operator {
		case LabelOpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case LabelOpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case LabelOpExists:
			if !ok {
				return false
			}
		case LabelOpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// validatePodTemplate checks a pod template; nodeLabels allows edgeset's
// node.labels['k'] downward API extension (edgeset.io/v1 daemonsets, and
// revisions, whose daemonset was validated when applied).
func validatePodTemplate(errs *fieldErrors, field string, t *PodTemplateSpec, nodeLabels bool) {
	validateLabels(errs, field+".metadata.labels", t.Metadata.Labels)
	validateAnnotations(errs, field+".metadata.annotations", t.Metadata.Annotations)
	validateUpdateLock(errs, field, t)
	validateImagePins(errs, field, t)
	validatePodSpec(errs, field+".spec", &t.Spec, nodeLabels)
}

func validatePodSpec(errs *fieldErrors, field string, p *PodSpec, nodeLabels bool) {
	validateLabels(errs, field+".nodeSelector", p.NodeSelector)
	if p.Affinity != nil && p.Affinity.NodeAffinity != nil && p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		validateNodeSelector(errs, field+".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	for i, t := range p.Tolerations {
		validateToleration(errs, fmt.Sprintf("%s.tolerations[%d]", field, i), t)
	}
	if g := p.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs.add(field+".terminationGracePeriodSeconds", "must be >= 0, not %d", *g)
	}
	if p.RestartPolicy != "" && p.RestartPolicy != RestartPolicyAlways {
		errs.add(field+".restartPolicy", "unsupported value %q: a daemon always restarts, so only Always is allowed", p.RestartPolicy)
	}
	pc := newPodCheck(errs, field, p, nodeLabels)
	pc.validate()
}

func validateNodeSelector(errs *fieldErrors, field string, ns *NodeSelector) {
	if len(ns.NodeSelectorTerms) == 0 {
		errs.add(field+".nodeSelectorTerms", "must have at least one term")
	}
	for i, term := range ns.NodeSelectorTerms {
		tf := fmt.Sprintf("%s.nodeSelectorTerms[%d]", field, i)
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			errs.add(tf, "must have matchExpressions or matchFields")
		}
		for j, r := range term.MatchExpressions {
			validateNodeRequirement(errs, fmt.Sprintf("%s.matchExpressions[%d]", tf, j), r)
		}
		for j, r := range term.MatchFields {
			validateFieldRequirement(errs, fmt.Sprintf("%s.matchFields[%d]", tf, j), r)
		}
	}
}

func validateNodeRequirement(errs *fieldErrors, field string, r NodeSelectorRequirement) {
	if p := LabelKeyProblem(r.Key); p != "" {
		errs.add(field+".key", "%s", p)
	}
	switch r.Operator {
	case NodeOpIn, NodeOpNotIn:
		if len(r.Values) == 0 {
			errs.add(field+".values", "must be non-empty for operator %s", r.Operator)
		}
	case NodeOpExists, NodeOpDoesNotExist:
		if len(r.Values) > 0 {
			errs.add(field+".values", "must be empty for operator %s", r.Operator)
		}
	case NodeOpGt, NodeOpLt:
		if len(r.Values) != 1 {
			errs.add(field+".values", "must have exactly one value for operator %s", r.Operator)
		} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); isRangeError(err) {
			errs.add(field+".values[0]", "must be an integer between %d and %d for operator %s, not %q", int64(-1<<63), int64(1<<63-1), r.Operator, r.Values[0])
		} else if err != nil {
			errs.add(field+".values[0]", "must be an integer for operator %s, not %q", r.Operator, r.Values[0])
		}
	default:
		errs.add(field+".operator", "unsupported operator %q: want In, NotIn, Exists, DoesNotExist, Gt or Lt", r.Operator)
	}
}

// isRangeError reports whether err is strconv's "value out of range".
func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func validateFieldRequirement(errs *fieldErrors, field string, r NodeSelectorRequirement) {
	if r.Key != "metadata.name" {
		errs.add(field+".key", "unsupported field %q: only metadata.name is supported", r.Key)
	}
	switch r.Operator {
	case NodeOpIn, NodeOpNotIn:
		if len(r.Values) != 1 {
			errs.add(field+".values", "must have exactly one value for operator %s", r.Operator)
		}
	default:
		errs.add(field+".operator", "unsupported operator %q for matchFields: want In or NotIn", r.Operator)
	}
}

func validateToleration(errs *fieldErrors, field string, t Toleration) {
	switch t.Operator {
	case TolerationOpEqual, "":
		if t.Key == "" {
			errs.add(field+".key", "required unless operator is Exists")
		}
	case TolerationOpExists:
		if t.Value != "" {
			errs.add(field+".value", "must be empty when operator is Exists")
		}
	default:
		errs.add(field+".operator", "unsupported operator %q: want Equal or Exists", t.Operator)
	}
	if t.Key != "" {
		if p := LabelKeyProblem(t.Key); p != "" {
			errs.add(field+".key", "%s", strings.Replace(p, "label key", "taint key", 1))
		}
	}
	switch t.Effect {
	case "", TaintNoSchedule, TaintPreferNoSchedule, TaintNoExecute:
	default:
		errs.add(field+".effect", "unsupported effect %q: want NoSchedule, PreferNoSchedule, NoExecute or empty (all effects)", t.Effect)
	}
	if t.TolerationSeconds != nil && t.Effect != TaintNoExecute && t.Effect != "" {
		errs.add(field+".tolerationSeconds", "only allowed with effect NoExecute or an empty effect")
	}
}

func validatePorts(errs *fieldErrors, field string, ports []ContainerPort) {
	names := map[string]bool{}
	for i, p := range ports {
		pf := fmt.Sprintf("%s[%d]", field, i)
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			errs.add(pf+".containerPort", "must be between 1 and 65535, not %d", p.ContainerPort)
		}
		if p.HostPort < 0 || p.HostPort > 65535 {
			errs.add(pf+".hostPort", "must be between 1 and 65535 (or 0 for none), not %d", p.HostPort)
		}
		switch p.Protocol {
		case "", ProtocolTCP, ProtocolUDP:
		default:
			errs.add(pf+".protocol", "unsupported protocol %q: want TCP or UDP", p.Protocol)
		}
		if p.Name != "" {
			if !isPortName(p.Name) {
				errs.add(pf+".name", "invalid port name %q: must be at most 15 lowercase alphanumerics or '-', with a letter and no '--'", p.Name)
			} else if names[p.Name] {
				errs.add(pf+".name", "duplicate port name %q", p.Name)
			}
			names[p.Name] = true
		}
	}
}

// isPortName reports whether s is an IANA service name, as Kubernetes
// requires of port names.
func isPortName(s string) bool {
	return len(s) <= 15 && portNameRE.MatchString(s) && !strings.Contains(s, "--") &&
		strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz")
}

func validateResources(errs *fieldErrors, field string, r ResourceRequirements) {
	for _, part := range []struct {
		name string
		list ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for _, k := range sortedKeys(part.list) {
			qf := field + "." + part.name + "[" + k + "]"
			v, err := part.list[k].MilliValue()
			switch {
			case err != nil:
				errs.add(qf, "%v", err)
			case v < 0:
				errs.add(qf, "must not be negative, not %q", part.list[k])
			}
		}
	}
	for _, k := range sortedKeys(r.Requests) {
		lim, ok := r.Limits[k]
		if !ok {
			continue
		}
		req, err1 := r.Requests[k].MilliValue()
		l, err2 := lim.MilliValue()
		if err1 == nil && err2 == nil && l >= 0 && req > l {
			errs.add(field+".requests["+k+"]", "must be less than or equal to the limit %s", lim)
		}
	}
}

// validateProbe checks a probe; a liveness or startup probe (mustSucceedOnce)
// must have successThreshold 1, as in Kubernetes.
func validateProbe(errs *fieldErrors, field string, p *Probe, mustSucceedOnce bool) {
	if p == nil {
		return
	}
	if mustSucceedOnce && p.SuccessThreshold > 1 {
		errs.add(field+".successThreshold", "must be 1, not %d", p.SuccessThreshold)
	}
	handlers := 0
	if p.Exec != nil {
		handlers++
		if len(p.Exec.Command) == 0 {
			errs.add(field+".exec.command", "required")
		}
	}
	if p.HTTPGet != nil {
		handlers++
		validateProbePort(errs, field+".httpGet.port", p.HTTPGet.Port)
		switch p.HTTPGet.Scheme {
		case "", "HTTP", "HTTPS":
		default:
			errs.add(field+".httpGet.scheme", "unsupported scheme %q: want HTTP or HTTPS", p.HTTPGet.Scheme)
		}
	}
	if p.TCPSocket != nil {
		handlers++
		validateProbePort(errs, field+".tcpSocket.port", p.TCPSocket.Port)
	}
	if handlers != 1 {
		errs.add(field, "must have exactly one handler (exec, httpGet or tcpSocket), has %d", handlers)
	}
	for _, t := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds}, {"timeoutSeconds", p.TimeoutSeconds},
		{"periodSeconds", p.PeriodSeconds}, {"successThreshold", p.SuccessThreshold},
		{"failureThreshold", p.FailureThreshold},
	} {
		if t.v < 0 {
			errs.add(field+"."+t.name, "must be >= 0, not %d", t.v)
		}
	}
}

// validateProbePort accepts a port number 1-65535 or a port name.
func validateProbePort(errs *fieldErrors, field string, port IntOrString) {
	switch {
	case port.IsString && port.StrVal == "":
		errs.add(field, "required")
	case port.IsString && !isPortName(port.StrVal):
		errs.add(field, "invalid port name %q", port.StrVal)
	case !port.IsString && (port.IntVal < 1 || port.IntVal > 65535):
		errs.add(field, "must be between 1 and 65535, not %d", port.IntVal)
	}
}

func validateUpdateStrategy(errs *fieldErrors, s *DaemonSetUpdateStrategy) {
	const field = "spec.updateStrategy"
	switch s.Type {
	case "", RollingUpdateStrategy:
	case OnDeleteStrategy:
		if s.RollingUpdate != nil {
			errs.add(field+".rollingUpdate", "only allowed with type RollingUpdate")
		}
	default:
		errs.add(field+".type", "unsupported type %q: want RollingUpdate or OnDelete", s.Type)
	}
	if s.RollingUpdate == nil {
		return
	}
	ru := s.RollingUpdate
	unavailOK := validateIntOrPercent(errs, field+".rollingUpdate.maxUnavailable", ru.MaxUnavailable)
	surgeOK := validateIntOrPercent(errs, field+".rollingUpdate.maxSurge", ru.MaxSurge)
	if unavailOK && surgeOK && isZero(ru.MaxUnavailable) && isZero(ru.MaxSurge) {
		errs.add(field+".rollingUpdate.maxUnavailable", "may not be 0 when maxSurge is 0")
	}
}

// validateIntOrPercent accepts nil, an integer >= 0 or a percentage 0-100%.
// A percentage too large to parse is out of range too, never 0%.
func validateIntOrPercent(errs *fieldErrors, field string, v *IntOrString) bool {
	switch {
	case v == nil:
		return true
	case !v.IsString && v.IntVal < 0:
		errs.add(field, "must be >= 0, not %d", v.IntVal)
	case v.IsString && !percentRE.MatchString(v.StrVal):
		errs.add(field, "invalid value %q: must be an integer or a percentage such as \"10%%\"", v.StrVal)
	case v.IsString:
		if pct, ok := v.Percent(); !ok || pct > 100 {
			errs.add(field, "must not be more than 100%%, not %q", v.StrVal)
		} else {
			return true
		}
	default:
		return true
	}
	return false
}

// isZero reports whether v is unset, 0 or "0%" (unset defaults to 0 only
// for maxSurge; maxUnavailable is defaulted before this matters).
func isZero(v *IntOrString) bool {
	if v == nil {
		return false
	}
	if pct, ok := v.Percent(); ok {
		return pct == 0
	}
	return !v.IsString && v.IntVal == 0
}

func validateRollout(errs *fieldErrors, ds *DaemonSet) {
	r := ds.Spec.Rollout
	if r == nil {
		return
	}
	const field = "spec.rollout"
	if ds.APIVersion != APIVersionEdgeset {
		errs.add(field, "only allowed with apiVersion %s, not %s", APIVersionEdgeset, ds.APIVersion)
	}
	if r.OfflineGraceSeconds != nil && *r.OfflineGraceSeconds < 0 {
		errs.add(field+".offlineGraceSeconds", "must be >= 0, not %d", *r.OfflineGraceSeconds)
	}
	if d := r.ProgressDeadlineSeconds; d != nil {
		if *d <= 0 {
			errs.add(field+".progressDeadlineSeconds", "must be > 0, not %d", *d)
		} else if *d <= ds.Spec.MinReadySeconds {
			errs.add(field+".progressDeadlineSeconds", "must be greater than spec.minReadySeconds (%d)", ds.Spec.MinReadySeconds)
		}
	}
	validateIntOrPercent(errs, field+".failureThreshold", r.FailureThreshold)
	if s := r.UpdateLockStaleAfterSeconds; s != nil && *s < 0 {
		errs.add(field+".updateLockStaleAfterSeconds", "must be >= 0 (0: never stale), not %d", *s)
	}
	validateSchedulePolicy(errs, field, r)
	validatePrefetchPolicy(errs, field, ds.Key(), r.Prefetch)
	if c := r.Canary; c != nil {
		if validateIntOrPercent(errs, field+".canary.nodes", c.Nodes) && (c.Nodes == nil || isZero(c.Nodes)) {
			errs.add(field+".canary.nodes", "required: at least one node or a percentage above 0%%")
		}
		if c.AutoPromoteSeconds < 0 {
			errs.add(field+".canary.autoPromoteSeconds", "must be >= 0, not %d", c.AutoPromoteSeconds)
		}
	}
}

// sortedKeys returns the keys of m in order, for deterministic messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
