package schema

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// podCheck validates the containers, volumes and security settings of one
// pod spec, which need to see each other: mounts name volumes, resource
// references name containers, a lifecycle sleep is bounded by the grace
// period.
type podCheck struct {
	errs  *fieldErrors
	field string // path of the pod spec, such as spec.template.spec
	spec  *PodSpec
	// nodeLabels allows the node.labels['k'] downward API extension.
	nodeLabels bool
	volumes    map[string]*Volume
	containers map[string]bool
}

func newPodCheck(errs *fieldErrors, field string, p *PodSpec, nodeLabels bool) *podCheck {
	pc := &podCheck{errs: errs, field: field, spec: p, nodeLabels: nodeLabels,
		volumes: map[string]*Volume{}, containers: map[string]bool{}}
	for _, cs := range [][]Container{p.InitContainers, p.Containers} {
		for _, c := range cs {
			pc.containers[c.Name] = true
		}
	}
	return pc
}

func (pc *podCheck) add(field, format string, args ...any) { pc.errs.add(field, format, args...) }

// gracePeriod is the pod's termination grace period, defaulted.
func (pc *podCheck) gracePeriod() int64 {
	if g := pc.spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return DefaultTerminationGracePeriodSeconds
}

func (pc *podCheck) validate() {
	pc.validateVolumes()
	f := pc.field
	if len(pc.spec.Containers) == 0 {
		pc.add(f+".containers", "required: at least one container")
	}
	seen := map[string]string{}
	for i := range pc.spec.InitContainers {
		pc.validateContainer(fmt.Sprintf("%s.initContainers[%d]", f, i), &pc.spec.InitContainers[i], true, seen)
	}
	for i := range pc.spec.Containers {
		pc.validateContainer(fmt.Sprintf("%s.containers[%d]", f, i), &pc.spec.Containers[i], false, seen)
	}
	pc.validateHostPorts()
	if sc := pc.spec.SecurityContext; sc != nil {
		pc.validatePodSecurityContext(f+".securityContext", sc)
	}
	for i, s := range pc.spec.ImagePullSecrets {
		validateObjectName(pc.errs, fmt.Sprintf("%s.imagePullSecrets[%d].name", f, i), "secret", s.Name)
	}
	pc.validateImageSource()
	if n := pc.spec.ServiceAccountName; n != "" && !IsDNS1123Subdomain(n) {
		pc.add(f+".serviceAccountName", "invalid name %q: must be a DNS-1123 subdomain", n)
	}
}

// validateHostPorts refuses two ports of the containers binding the same
// host port, protocol and address, as Kubernetes does.
func (pc *podCheck) validateHostPorts() {
	bound := map[string]bool{}
	for i, c := range pc.spec.Containers {
		for j, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = ProtocolTCP
			}
			key := fmt.Sprintf("%s/%s/%d", proto, p.HostIP, p.HostPort)
			if bound[key] {
				pc.add(fmt.Sprintf("%s.containers[%d].ports[%d].hostPort", pc.field, i, j), "duplicate host port %d/%s: another port of this pod binds it", p.HostPort, proto)
			}
			bound[key] = true
		}
	}
}

// validateObjectName requires the name of a referenced ConfigMap or Secret
// to be a DNS-1123 subdomain.
func validateObjectName(errs *fieldErrors, field, kind, name string) {
	switch {
	case name == "":
		errs.add(field, "required: the name of a %s", kind)
	case !IsDNS1123Subdomain(name):
		errs.add(field, "invalid %s name %q: must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.')", kind, name)
	}
}

// validateContainer checks one init (isInit) or main container; seen maps
// the container names met so far to their field paths.
func (pc *podCheck) validateContainer(field string, c *Container, isInit bool, seen map[string]string) {
	switch {
	case c.Name == "":
		pc.add(field+".name", "required")
	case !IsDNS1123Label(c.Name):
		pc.add(field+".name", "invalid container name %q: must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)", c.Name)
	case seen[c.Name] != "":
		pc.add(field+".name", "duplicate container name %q%s", c.Name, alsoIn(seen[c.Name], field))
	default:
		seen[c.Name] = field
	}
	switch {
	case c.Image == "":
		pc.add(field+".image", "required")
	case strings.TrimSpace(c.Image) != c.Image || strings.ContainsAny(c.Image, " \t\n"):
		pc.add(field+".image", "invalid image %q: must not contain whitespace", c.Image)
	}
	switch c.ImagePullPolicy {
	case "", PullAlways, PullIfNotPresent, PullNever:
	default:
		pc.add(field+".imagePullPolicy", "unsupported value %q: want Always, IfNotPresent or Never", c.ImagePullPolicy)
	}
	pc.validateRestartPolicy(field, c, isInit)
	for i := range c.Env {
		pc.validateEnvVar(fmt.Sprintf("%s.env[%d]", field, i), &c.Env[i])
	}
	for i := range c.EnvFrom {
		pc.validateEnvFrom(fmt.Sprintf("%s.envFrom[%d]", field, i), &c.EnvFrom[i])
	}
	validatePorts(pc.errs, field+".ports", c.Ports)
	validateResources(pc.errs, field+".resources", c.Resources)
	pc.validateMounts(field, c)
	validateProbe(pc.errs, field+".livenessProbe", c.LivenessProbe, true)
	validateProbe(pc.errs, field+".readinessProbe", c.ReadinessProbe, false)
	validateProbe(pc.errs, field+".startupProbe", c.StartupProbe, true)
	if c.Lifecycle != nil {
		pc.validateHandler(field+".lifecycle.postStart", c.Lifecycle.PostStart)
		pc.validateHandler(field+".lifecycle.preStop", c.Lifecycle.PreStop)
	}
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		pc.add(field+".workingDir", "must be an absolute path, not %q", c.WorkingDir)
	}
	pc.validateTermination(field, c)
	if c.SecurityContext != nil {
		validateSecurityContext(pc.errs, field+".securityContext", c.SecurityContext)
	}
}

// alsoIn names the other list an earlier duplicate is in: ""
// when it is the same list as field's, " (also initContainers[0])" for
// instance.
func alsoIn(other, field string) string {
	list := func(f string) string { return f[:strings.LastIndex(f, "[")] }
	if list(other) == list(field) {
		return ""
	}
	return " (also " + other[strings.LastIndex(list(other), ".")+1:] + ")"
}

// validateRestartPolicy allows restartPolicy Always on init containers only
// (a sidecar), and forbids probes and hooks on the other init containers,
// which run to completion (Kubernetes' rules).
func (pc *podCheck) validateRestartPolicy(field string, c *Container, isInit bool) {
	if !isInit {
		if c.RestartPolicy != nil {
			pc.add(field+".restartPolicy", "only allowed on init containers (restartPolicy: Always makes a sidecar)")
		}
		return
	}
	if c.RestartPolicy != nil {
		if *c.RestartPolicy != RestartPolicyAlways {
			pc.add(field+".restartPolicy", "unsupported value %q: only Always (a sidecar) is allowed on an init container", *c.RestartPolicy)
		}
		return
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"livenessProbe", c.LivenessProbe != nil}, {"readinessProbe", c.ReadinessProbe != nil},
		{"startupProbe", c.StartupProbe != nil}, {"lifecycle", c.Lifecycle != nil},
	} {
		if f.set {
			pc.add(field+"."+f.name, "not allowed on an init container that runs to completion; only a sidecar (restartPolicy: Always) may have it")
		}
	}
}

func (pc *podCheck) validateTermination(field string, c *Container) {
	if p := c.TerminationMessagePath; p != "" && !path.IsAbs(p) {
		pc.add(field+".terminationMessagePath", "must be an absolute path, not %q", p)
	}
	switch c.TerminationMessagePolicy {
	case "", TerminationMessageReadFile, TerminationMessageFallbackToLogsOnError:
	default:
		pc.add(field+".terminationMessagePolicy", "unsupported value %q: want File or FallbackToLogsOnError", c.TerminationMessagePolicy)
	}
}

// validateHandler checks a lifecycle hook: exactly one of exec, httpGet,
// tcpSocket and sleep; a sleep within the termination grace period.
func (pc *podCheck) validateHandler(field string, h *LifecycleHandler) {
	if h == nil {
		return
	}
	n := 0
	if h.Exec != nil {
		n++
		if len(h.Exec.Command) == 0 {
			pc.add(field+".exec.command", "required")
		}
	}
	if h.HTTPGet != nil {
		n++
		validateProbePort(pc.errs, field+".httpGet.port", h.HTTPGet.Port)
		switch h.HTTPGet.Scheme {
		case "", "HTTP", "HTTPS":
		default:
			pc.add(field+".httpGet.scheme", "unsupported scheme %q: want HTTP or HTTPS", h.HTTPGet.Scheme)
		}
	}
	if h.TCPSocket != nil {
		n++
		validateProbePort(pc.errs, field+".tcpSocket.port", h.TCPSocket.Port)
	}
	if h.Sleep != nil {
		n++
		if g := pc.gracePeriod(); h.Sleep.Seconds <= 0 || h.Sleep.Seconds > g {
			pc.add(field+".sleep.seconds", "must be between 1 and the termination grace period (%d), not %d", g, h.Sleep.Seconds)
		}
	}
	if n != 1 {
		pc.add(field, "must have exactly one handler (exec, httpGet, tcpSocket or sleep), has %d", n)
	}
}

// validateMounts checks a container's volume mounts.
func (pc *podCheck) validateMounts(field string, c *Container) {
	paths := map[string]bool{}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	for i, m := range c.VolumeMounts {
		mf := fmt.Sprintf("%s.volumeMounts[%d]", field, i)
		if pc.volumes[m.Name] == nil {
			pc.add(mf+".name", "volume %q is not declared in %s.volumes", m.Name, pc.field)
		}
		switch {
		case !path.IsAbs(m.MountPath):
			pc.add(mf+".mountPath", "must be an absolute path, not %q", m.MountPath)
		case paths[path.Clean(m.MountPath)]:
			pc.add(mf+".mountPath", "duplicate mount path %q in this container", m.MountPath)
		}
		paths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" && m.SubPathExpr != "" {
			pc.add(mf+".subPathExpr", "subPath and subPathExpr are mutually exclusive")
		}
		validateRelativePath(pc.errs, mf+".subPath", m.SubPath, false)
		validateRelativePath(pc.errs, mf+".subPathExpr", m.SubPathExpr, false)
		if p := m.MountPropagation; p != nil {
			switch *p {
			case MountPropagationNone, MountPropagationHostToContainer:
			case MountPropagationBidirectional:
				if !privileged {
					pc.add(mf+".mountPropagation", "Bidirectional is only allowed in a privileged container, as in Kubernetes")
				}
			default:
				pc.add(mf+".mountPropagation", "unsupported value %q: want None, HostToContainer or Bidirectional", *p)
			}
		}
	}
}

// validateRelativePath requires a path that stays inside its volume:
// relative, without a ".." element, and (a file path, reserved true) not
// starting with "..", which the kubelet's atomic writer reserves.
func validateRelativePath(errs *fieldErrors, field, p string, reserved bool) {
	if p == "" {
		return
	}
	switch {
	case path.IsAbs(p):
		errs.add(field, "must be a relative path, not %q", p)
	case slices.Contains(strings.Split(p, "/"), ".."):
		errs.add(field, "must not contain a '..' element: %q would leave the volume", p)
	case reserved && strings.HasPrefix(p, ".."):
		errs.add(field, "must not start with '..' (reserved for the atomic update of the volume): %q", p)
	}
}

// validateEnvVar checks one environment variable and its source.
func (pc *podCheck) validateEnvVar(field string, e *EnvVar) {
	if p := envNameProblem(e.Name); p != "" {
		pc.add(field+".name", "%s", p)
	}
	if e.ValueFrom == nil {
		return
	}
	vf := field + ".valueFrom"
	if e.Value != "" {
		pc.add(vf, "may not be set together with value")
	}
	src := e.ValueFrom
	n := 0
	if src.FieldRef != nil {
		n++
		pc.validateFieldRef(vf+".fieldRef", src.FieldRef, false)
	}
	if src.ResourceFieldRef != nil {
		n++
		pc.validateResourceRef(vf+".resourceFieldRef", src.ResourceFieldRef, false)
	}
	if r := src.ConfigMapKeyRef; r != nil {
		n++
		validateKeyRef(pc.errs, vf+".configMapKeyRef", "configmap", r.Name, r.Key)
	}
	if r := src.SecretKeyRef; r != nil {
		n++
		validateKeyRef(pc.errs, vf+".secretKeyRef", "secret", r.Name, r.Key)
	}
	if n != 1 {
		pc.add(vf, "must have exactly one source (fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef), has %d", n)
	}
}

// envNameProblem explains why name is not a valid environment variable
// name (Kubernetes: printable ASCII other than '='), or returns "".
func envNameProblem(name string) string {
	if name == "" {
		return "required"
	}
	for _, r := range name {
		if r < ' ' || r > '~' || r == '=' {
			return fmt.Sprintf("invalid variable name %q: must consist of printable ASCII characters other than '='", name)
		}
	}
	return ""
}

func validateKeyRef(errs *fieldErrors, field, kind, name, key string) {
	validateObjectName(errs, field+".name", kind, name)
	if p := ConfigKeyProblem(key); p != "" {
		errs.add(field+".key", "%s", p)
	}
}

// validateEnvFrom checks one envFrom source.
func (pc *podCheck) validateEnvFrom(field string, e *EnvFromSource) {
	n := 0
	if e.ConfigMapRef != nil {
		n++
		validateObjectName(pc.errs, field+".configMapRef.name", "configmap", e.ConfigMapRef.Name)
	}
	if e.SecretRef != nil {
		n++
		validateObjectName(pc.errs, field+".secretRef.name", "secret", e.SecretRef.Name)
	}
	if n != 1 {
		pc.add(field, "must have exactly one of configMapRef and secretRef, has %d", n)
	}
	if e.Prefix != "" {
		if p := envNameProblem(e.Prefix); p != "" {
			pc.add(field+".prefix", "%s", strings.Replace(p, "variable name", "prefix", 1))
		}
	}
}

// validateImageSource checks spec.imageSource, edgeset's extension: only
// under apiVersion edgeset.io/v1, registry or controller.
func (pc *podCheck) validateImageSource() {
	v, f := pc.spec.ImageSource, pc.field+".imageSource"
	switch {
	case v == "":
	case !pc.nodeLabels:
		pc.add(f, "only allowed with apiVersion %s, not %s", APIVersionEdgeset, APIVersionApps)
	case v != ImageSourceRegistry && v != ImageSourceController:
		pc.add(f, "unsupported value %q: must be %s or %s", v, ImageSourceRegistry, ImageSourceController)
	}
}
