package edgeagent

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// LocalPolicy is what the device owner refuses to run whatever the
// controller asks. The zero value allows everything. A refused instance is
// reported with phase Refused and never created. Every rule covers init
// containers (sidecars included) as well as containers.
type LocalPolicy struct {
	RefusePrivileged  bool
	RefuseHostNetwork bool
	RefuseHostPID     bool
	// RestrictHostPaths limits hostPath volumes, of every type, to
	// AllowedHostPaths: a path is allowed when it equals one of them or
	// lies beneath one. With RestrictHostPaths set and no prefixes, every
	// hostPath is refused. A mount of a hostPath volume must then also stay
	// inside it: an absolute subPath or one with ".." is refused.
	RestrictHostPaths bool
	AllowedHostPaths  []string
	// DeniedCapabilities are capabilities no container may add
	// (securityContext.capabilities.add); ALL denies adding any. Names are
	// compared as CapabilityName spells them.
	DeniedCapabilities []string
	// AllowedCapabilities, when not empty, are the only capabilities a
	// container may add; adding ALL needs ALL here.
	AllowedCapabilities []string
	// RefuseUnconfinedSeccomp refuses seccompProfile type Unconfined, set on
	// the container or inherited from the pod.
	RefuseUnconfinedSeccomp bool
	// RefuseUnmaskedProcMount refuses procMount Unmasked.
	RefuseUnmaskedProcMount bool
}

// capName is a capability as the engine and the policy compare it
// (schema.CapabilityName's spelling: "cap_net_admin" is "NET_ADMIN").
func capName(name string) string {
	c, _ := schema.CapabilityName(name)
	return c
}

// Validate reports every capability of the policy that does not exist,
// naming the list it is in, so a typo cannot leave a capability allowed.
func (p LocalPolicy) Validate() error {
	var errs []error
	for _, l := range []struct {
		key   string
		names []string
	}{{"denied-capabilities", p.DeniedCapabilities}, {"allowed-capabilities", p.AllowedCapabilities}} {
		for _, n := range l.names {
			if _, ok := schema.CapabilityName(n); !ok {
				errs = append(errs, fmt.Errorf("%s: %q is not a Linux capability", l.key, n))
			}
		}
	}
	return errors.Join(errs...)
}

// Check returns nil when t may run, or an error listing every reason it may
// not, each naming the field.
func (p LocalPolicy) Check(t schema.PodTemplateSpec) error {
	var reasons []string
	if p.RefuseHostNetwork && t.Spec.HostNetwork {
		reasons = append(reasons, "spec.hostNetwork is refused by local policy")
	}
	if p.RefuseHostPID && t.Spec.HostPID {
		reasons = append(reasons, "spec.hostPID is refused by local policy")
	}
	for _, group := range []struct {
		field string
		cs    []schema.Container
	}{{"spec.initContainers", t.Spec.InitContainers}, {"spec.containers", t.Spec.Containers}} {
		for i, c := range group.cs {
			field := fmt.Sprintf("%s[%d]", group.field, i)
			reasons = append(reasons, p.containerReasons(field, c, t.Spec.SecurityContext)...)
			reasons = append(reasons, p.subPathReasons(field, c.VolumeMounts, t.Spec.Volumes)...)
		}
	}
	reasons = append(reasons, p.hostPathReasons(t.Spec.Volumes)...)
	if len(reasons) == 0 {
		return nil
	}
	return fmt.Errorf("refused: %s", strings.Join(reasons, "; "))
}

// containerReasons are the refusals of one container at field, whose pod
// security context is pod (nil if none).
func (p LocalPolicy) containerReasons(field string, c schema.Container, pod *schema.PodSecurityContext) []string {
	var out []string
	sc := c.SecurityContext
	if sc == nil {
		sc = &schema.SecurityContext{}
	}
	privileged := sc.Privileged != nil && *sc.Privileged
	if privileged && p.RefusePrivileged {
		out = append(out, fmt.Sprintf("%s.securityContext.privileged (%s) is refused by local policy", field, c.Name))
	}
	if privileged && !p.RefusePrivileged && p.restrictsCapabilities() {
		out = append(out, fmt.Sprintf("%s.securityContext.privileged (%s) grants every capability, which local policy restricts", field, c.Name))
	}
	if sc.Capabilities != nil {
		for j, name := range sc.Capabilities.Add {
			if why := p.capabilityRefused(name); why != "" {
				out = append(out, fmt.Sprintf("%s.securityContext.capabilities.add[%d] (%s) %s", field, j, name, why))
			}
		}
	}
	if p.RefuseUnconfinedSeccomp {
		if at := unconfinedSeccomp(field, sc, pod); at != "" {
			out = append(out, fmt.Sprintf("%s.type Unconfined (%s) is refused by local policy", at, c.Name))
		}
	}
	if p.RefuseUnmaskedProcMount && sc.ProcMount != nil && *sc.ProcMount == schema.ProcMountUnmasked {
		out = append(out, fmt.Sprintf("%s.securityContext.procMount Unmasked (%s) is refused by local policy", field, c.Name))
	}
	return out
}

// restrictsCapabilities reports whether the policy limits added
// capabilities at all.
func (p LocalPolicy) restrictsCapabilities() bool {
	return len(p.DeniedCapabilities) > 0 || len(p.AllowedCapabilities) > 0
}

// capabilityRefused returns why adding name is refused, or "".
func (p LocalPolicy) capabilityRefused(name string) string {
	c := capName(name)
	for _, d := range p.DeniedCapabilities {
		if d := capName(d); d == c || d == schema.CapabilityAll {
			return "is denied by local policy"
		}
	}
	if c == schema.CapabilityAll && len(p.DeniedCapabilities) > 0 {
		return "would add denied capabilities"
	}
	if len(p.AllowedCapabilities) == 0 {
		return ""
	}
	for _, a := range p.AllowedCapabilities {
		if a := capName(a); a == c || a == schema.CapabilityAll {
			return ""
		}
	}
	return "is not among the capabilities local policy allows"
}

// unconfinedSeccomp returns "" when the effective seccomp profile of the
// container at field (its own, else the pod's) is not Unconfined, else the
// field that makes it so.
func unconfinedSeccomp(field string, sc *schema.SecurityContext, pod *schema.PodSecurityContext) string {
	if sc.SeccompProfile != nil {
		if sc.SeccompProfile.Type == schema.SeccompUnconfined {
			return field + ".securityContext.seccompProfile"
		}
		return ""
	}
	if pod != nil && pod.SeccompProfile != nil && pod.SeccompProfile.Type == schema.SeccompUnconfined {
		return "spec.securityContext.seccompProfile"
	}
	return ""
}

// subPathReasons refuses, under RestrictHostPaths, a mount of a hostPath
// volume whose subPath (or the literal part of its subPathExpr) is
// absolute or climbs out of the volume with "..": the allowlist is checked
// on the volume's path, so the mount must stay beneath it.
func (p LocalPolicy) subPathReasons(field string, mounts []schema.VolumeMount, vols []schema.Volume) []string {
	if !p.RestrictHostPaths {
		return nil
	}
	var out []string
	for j, m := range mounts {
		if !isHostPathVolume(vols, m.Name) {
			continue
		}
		for _, sp := range []struct{ key, value string }{{"subPath", m.SubPath}, {"subPathExpr", m.SubPathExpr}} {
			if escapesVolume(sp.value) {
				out = append(out, fmt.Sprintf("%s.volumeMounts[%d].%s %q leaves hostPath volume %q, which local policy restricts", field, j, sp.key, sp.value, m.Name))
			}
		}
	}
	return out
}

func isHostPathVolume(vols []schema.Volume, name string) bool {
	for _, v := range vols {
		if v.Name == name {
			return v.HostPath != nil
		}
	}
	return false
}

// escapesVolume reports whether sub, relative to a volume's root, is
// absolute or has a ".." component.
func escapesVolume(sub string) bool {
	if path.IsAbs(sub) {
		return true
	}
	return slices.Contains(strings.Split(sub, "/"), "..")
}

func (p LocalPolicy) hostPathReasons(vols []schema.Volume) []string {
	if !p.RestrictHostPaths {
		return nil
	}
	var out []string
	for i, v := range vols {
		if v.HostPath != nil && !p.hostPathAllowed(v.HostPath.Path) {
			out = append(out, fmt.Sprintf("spec.volumes[%d].hostPath.path %q is outside the allowed host paths", i, v.HostPath.Path))
		}
	}
	return out
}

// hostPathAllowed compares whole path components, so "/data" allows
// "/data/x" but not "/database" or "/data/../etc".
func (p LocalPolicy) hostPathAllowed(hostPath string) bool {
	if !path.IsAbs(hostPath) || hasDotDot(hostPath) {
		return false
	}
	clean := path.Clean(hostPath)
	for _, prefix := range p.AllowedHostPaths {
		pre := path.Clean(prefix)
		if clean == pre || pre == "/" || strings.HasPrefix(clean, pre+"/") {
			return true
		}
	}
	return false
}
