package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// MaxMessageSize bounds every MQTT payload on the v1 topics. Decoders reject
// larger messages before parsing them.
const MaxMessageSize = 256 << 10

// Wire decoding errors, wrapped with details by the decoders.
var (
	// ErrMessageTooLarge: the payload exceeds MaxMessageSize.
	ErrMessageTooLarge = errors.New("message too large")
	// ErrSchemaVersion: the payload's schemaVersion is not WireVersion.
	ErrSchemaVersion = errors.New("unsupported schemaVersion")
	// ErrHashMismatch: a Revision's hash is not the hash of its template.
	ErrHashMismatch = errors.New("revision hash does not match template")
	// ErrConfigHashMismatch: a ConfigMapMessage's or SecretMessage's hash
	// is not the hash of its object.
	ErrConfigHashMismatch = errors.New("config object hash does not match its content")
)

// The wire decoders below parse one MQTT payload each. They are strict:
// a payload over MaxMessageSize, with trailing data, with a field the
// message type lacks, with a schemaVersion other than WireVersion, or with
// a missing or invalid field is rejected with an error naming the field.
// Unknown fields are rejected rather than ignored because schemaVersion is
// how the v1 contract evolves: a producer that adds a field must bump it,
// and a typo or a producer built against another schema fails loudly
// instead of being half understood. Invalid fields are reported together as
// a *ValidationError. They never panic.

// DecodeNodeStatus parses and checks a status-topic payload.
func DecodeNodeStatus(b []byte) (NodeStatus, error) {
	var m NodeStatus
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateNodeStatus(e, &m) })
}

// DecodePresence parses and checks an online-topic payload.
func DecodePresence(b []byte) (Presence, error) {
	var m Presence
	return m, decodeWire(b, &m, func(e *fieldErrors) {
		validateWireHeader(e, m.SchemaVersion, m.Node)
		if m.Session <= 0 {
			e.add("session", "must be > 0 (the connect time in Unix nanoseconds), not %d", m.Session)
		}
	})
}

// DecodeDesiredState parses and checks a desired-topic payload.
func DecodeDesiredState(b []byte) (DesiredState, error) {
	var m DesiredState
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateDesiredState(e, &m) })
}

// DecodeObservedState parses and checks an observed-topic payload.
func DecodeObservedState(b []byte) (ObservedState, error) {
	var m ObservedState
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateObservedState(e, &m) })
}

// DecodeNodeEvent parses and checks an events-topic payload.
func DecodeNodeEvent(b []byte) (NodeEvent, error) {
	var m NodeEvent
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateNodeEvent(e, &m) })
}

// DecodeRevision parses and checks a revision payload, including that Hash
// is TemplateHash(Template) (the error then wraps ErrHashMismatch) and that
// the template passes the same validation as a manifest's.
func DecodeRevision(b []byte) (Revision, error) {
	var m Revision
	err := decodeWire(b, &m, func(e *fieldErrors) { validateRevision(e, &m) })
	if err != nil {
		return m, err
	}
	if got := TemplateHash(m.Template); got != m.Hash {
		return m, fmt.Errorf("%w: hash %s, template hashes to %s", ErrHashMismatch, m.Hash, got)
	}
	return m, nil
}

// DecodeConfigMapMessage parses and checks a ConfigMap topic payload: the
// ConfigMap passes ValidateConfigMap and hashes to Hash (the error then
// wraps ErrConfigHashMismatch).
func DecodeConfigMapMessage(b []byte) (ConfigMapMessage, error) {
	var m ConfigMapMessage
	err := decodeWire(b, &m, func(e *fieldErrors) {
		validateVersion(e, m.SchemaVersion)
		validateRevisionHash(e, "hash", m.Hash)
		nest(e, "configMap", ValidateConfigMap(&m.ConfigMap))
	})
	if err != nil {
		return m, err
	}
	if got := ConfigMapHash(m.ConfigMap); got != m.Hash {
		return m, fmt.Errorf("%w: hash %s, configmap hashes to %s", ErrConfigHashMismatch, m.Hash, got)
	}
	return m, nil
}

// DecodeSecretMessage parses and checks a node's secret topic payload: the
// Secret passes ValidateSecret, has no stringData (the controller merges it
// into data) and hashes to Hash (the error then wraps
// ErrConfigHashMismatch). The caller checks that Node is its own name.
func DecodeSecretMessage(b []byte) (SecretMessage, error) {
	var m SecretMessage
	err := decodeWire(b, &m, func(e *fieldErrors) {
		validateWireHeader(e, m.SchemaVersion, m.Node)
		validateRevisionHash(e, "hash", m.Hash)
		if len(m.Secret.StringData) > 0 {
			e.add("secret.stringData", "must be empty: stringData is merged into data before a Secret is sent")
		}
		nest(e, "secret", ValidateSecret(&m.Secret))
	})
	if err != nil {
		return m, err
	}
	if got := SecretHash(m.Secret); got != m.Hash {
		return m, fmt.Errorf("%w: hash %s, secret hashes to %s", ErrConfigHashMismatch, m.Hash, got)
	}
	return m, nil
}

// nest records the problems of a nested validation under field.
func nest(errs *fieldErrors, field string, err error) {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return
	}
	for _, fe := range ve.Errors {
		errs.add(field+"."+fe.Field, "%s", fe.Message)
	}
}

// validateVersion checks the schemaVersion of a message without a node.
func validateVersion(errs *fieldErrors, version int) {
	if version != WireVersion {
		errs.add("schemaVersion", "%v %d: want %d", ErrSchemaVersion, version, WireVersion)
	}
}

// Encode marshals a wire message. It exists so that producers and the golden
// tests share one encoding: compact JSON with encoding/json's field order.
func Encode(v any) ([]byte, error) {
	return json.Marshal(v)
}

// decodeWire parses b strictly into v, then runs check.
func decodeWire(b []byte, v any, check func(*fieldErrors)) error {
	if len(b) > MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, len(b), MaxMessageSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %T: empty message", v)
	} else if err != nil {
		return fmt.Errorf("decode %T: %w", v, jsonProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %T: trailing data after the JSON object", v)
	}
	var errs fieldErrors
	check(&errs)
	return errs.err()
}

// jsonProblem rewrites encoding/json errors to name the field, and a
// syntax error to its offset: encoding/json would quote the offending
// character, and a payload may be a secret.
func jsonProblem(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: must be %s, not a JSON %s", te.Field, te.Type, te.Value)
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at offset %d", se.Offset)
	}
	return err
}

// validateWireHeader checks the fields every message carries. A node name
// must be usable as one MQTT topic level.
func validateWireHeader(errs *fieldErrors, version int, node string) {
	if version != WireVersion {
		errs.add("schemaVersion", "%v %d: want %d", ErrSchemaVersion, version, WireVersion)
	}
	validateNodeName(errs, "node", node)
}

// validateNodeName applies NodeNameProblem, which also keeps MQTT
// wildcards and separators out of topics.
func validateNodeName(errs *fieldErrors, field, node string) {
	switch {
	case node == "":
		errs.add(field, "required")
	case !ValidNodeName(node):
		errs.add(field, "%s", NodeNameProblem(node))
	}
}

func validateNodeStatus(errs *fieldErrors, m *NodeStatus) {
	validateWireHeader(errs, m.SchemaVersion, m.Node)
	validateNodeFields(errs, edgesetNodeFields, &Node{
		Name: m.Node, Labels: m.Labels, Taints: m.Taints, Conditions: m.Conditions,
		Addresses: m.Addresses, Capacity: m.Capacity, Info: m.Info,
	})
}

// nodeFieldNames names a node's fields in the shape it was read from.
type nodeFieldNames struct{ labels, taints, conditions, addresses, capacity string }

var (
	edgesetNodeFields = nodeFieldNames{"labels", "taints", "conditions", "addresses", "capacity"}
	k8sNodeFields     = nodeFieldNames{"metadata.labels", "spec.taints", "status.conditions", "status.addresses", "status.capacity"}
)

// validateNodeFields checks a node's labels, taints, conditions, addresses
// and capacity, naming fields as in names.
func validateNodeFields(errs *fieldErrors, names nodeFieldNames, n *Node) {
	validateLabels(errs, names.labels, n.Labels)
	for i, t := range n.Taints {
		validateTaint(errs, fmt.Sprintf("%s[%d]", names.taints, i), t)
	}
	for i, c := range n.Conditions {
		cf := fmt.Sprintf("%s[%d]", names.conditions, i)
		if c.Type == "" {
			errs.add(cf+".type", "required")
		}
		if !slices.Contains([]string{ConditionTrue, ConditionFalse, ConditionUnknown}, c.Status) {
			errs.add(cf+".status", "unsupported status %q: want True, False or Unknown", c.Status)
		}
	}
	for i, a := range n.Addresses {
		if a.Type == "" || a.Address == "" {
			errs.add(fmt.Sprintf("%s[%d]", names.addresses, i), "type and address are required")
		}
	}
	for _, k := range sortedKeys(n.Capacity) {
		if _, err := n.Capacity[k].MilliValue(); err != nil {
			errs.add(names.capacity+"["+k+"]", "%v", err)
		}
	}
}

func validateTaint(errs *fieldErrors, field string, t Taint) {
	if p := LabelKeyProblem(t.Key); p != "" {
		errs.add(field+".key", "%s", strings.Replace(p, "label key", "taint key", 1))
	}
	if p := LabelValueProblem(t.Value); p != "" {
		errs.add(field+".value", "%s", strings.Replace(p, "label value", "taint value", 1))
	}
	switch t.Effect {
	case TaintNoSchedule, TaintPreferNoSchedule, TaintNoExecute:
	default:
		errs.add(field+".effect", "unsupported effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
	}
}

func validateDesiredState(errs *fieldErrors, m *DesiredState) {
	validateWireHeader(errs, m.SchemaVersion, m.Node)
	for i, in := range m.Instances {
		f := fmt.Sprintf("instances[%d]", i)
		validateDaemonSetKey(errs, f+".daemonSet", in.DaemonSet)
		validateRevisionHash(errs, f+".revision", in.Revision)
		if o := in.OverrideUpdateLock; o != "" {
			if _, err := ParseLockInstant(o); err != nil {
				errs.add(f+".overrideUpdateLock", "invalid instant %q: want RFC 3339", o)
			}
		}
	}
	validateObjectRefs(errs, "configMaps", m.ConfigMaps)
	validateObjectRefs(errs, "secrets", m.Secrets)
	validatePrefetchAsks(errs, m.Prefetch)
}

// validateObjectRefs checks config object references: a namespace, a
// name and a content hash each, no object twice.
func validateObjectRefs(errs *fieldErrors, field string, refs []ObjectRef) {
	seen := map[string]bool{}
	for i, r := range refs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !IsDNS1123Label(r.Namespace) {
			errs.add(f+".namespace", "invalid namespace %q: must be a DNS-1123 label", r.Namespace)
		}
		if !IsDNS1123Subdomain(r.Name) {
			errs.add(f+".name", "invalid name %q: must be a DNS-1123 subdomain", r.Name)
		}
		if !isRevisionHash(r.Hash) {
			errs.add(f+".hash", "invalid content hash %q: want 20 lowercase hex digits", r.Hash)
		}
		if key := r.Namespace + "/" + r.Name; seen[key] {
			errs.add(f, "duplicate reference to %s", key)
		} else {
			seen[key] = true
		}
	}
}

func validateObservedState(errs *fieldErrors, m *ObservedState) {
	validateWireHeader(errs, m.SchemaVersion, m.Node)
	for i, in := range m.Instances {
		if validInstance(&in) {
			continue // the field names below are built only for an error
		}
		f := fmt.Sprintf("instances[%d]", i)
		validateDaemonSetKey(errs, f+".daemonSet", in.DaemonSet)
		validateRevisionHash(errs, f+".revision", in.Revision)
		if !slices.Contains(instancePhases, in.Phase) {
			errs.add(f+".phase", "unsupported phase %q: want one of %s", in.Phase, strings.Join(instancePhases, ", "))
		}
		if in.Restarts < 0 {
			errs.add(f+".restarts", "must be >= 0, not %d", in.Restarts)
		}
		validateUpdateLockStatus(errs, f+".updateLock", in.UpdateLock)
	}
	validatePrefetchStatuses(errs, m.Prefetch)
}

// instancePhases are the phases an agent may report.
var instancePhases = []string{
	PhasePending, PhasePulling, PhaseRunning, PhaseCrashLoopBackOff, PhaseImagePullBackOff,
	PhaseErrImagePull, PhaseFailed, PhaseRefused, PhaseTerminating,
	PhaseCreateContainerConfigError, PhaseInitError, PhaseInitCrashLoopBackOff, PhaseInitializing,
}

func validateNodeEvent(errs *fieldErrors, m *NodeEvent) {
	validateWireHeader(errs, m.SchemaVersion, m.Node)
	if m.Time.IsZero() {
		errs.add("time", "required")
	}
	if m.Type != EventNormal && m.Type != EventWarning {
		errs.add("type", "unsupported type %q: want Normal or Warning", m.Type)
	}
	if m.Reason == "" {
		errs.add("reason", "required")
	}
	if m.DaemonSet != "" {
		validateDaemonSetKey(errs, "daemonSet", m.DaemonSet)
	}
}

func validateRevision(errs *fieldErrors, m *Revision) {
	if m.SchemaVersion != WireVersion {
		errs.add("schemaVersion", "%v %d: want %d", ErrSchemaVersion, m.SchemaVersion, WireVersion)
	}
	validateRevisionHash(errs, "hash", m.Hash)
	validateDaemonSetKey(errs, "daemonSet", m.DaemonSet)
	if m.Number < 1 {
		errs.add("number", "must be >= 1, not %d", m.Number)
	}
	validatePodTemplate(errs, "template", &m.Template, true)
}

// validateDaemonSetKey requires "namespace/name".
// validInstance reports whether in passes every check of
// validateObservedState's loop.
func validInstance(in *InstanceStatus) bool {
	ns, name, ok := strings.Cut(in.DaemonSet, "/")
	return ok && IsDNS1123Label(ns) && IsDNS1123Subdomain(name) && isRevisionHash(in.Revision) &&
		slices.Contains(instancePhases, in.Phase) && in.Restarts >= 0 &&
		(in.UpdateLock == nil || !in.UpdateLock.HeldSince.IsZero())
}

func validateDaemonSetKey(errs *fieldErrors, field, key string) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || !IsDNS1123Label(ns) || !IsDNS1123Subdomain(name) {
		errs.add(field, "invalid daemonset key %q: want namespace/name", key)
	}
}

func validateRevisionHash(errs *fieldErrors, field, hash string) {
	if !isRevisionHash(hash) {
		errs.add(field, "invalid revision hash %q: want 20 lowercase hex digits", hash)
	}
}

// isRevisionHash reports whether s is a revision hash: 20 lowercase hex
// digits.
func isRevisionHash(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
