package edgeagent

import (
	"fmt"
	"path"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// LocalPolicy is what the device owner refuses to run whatever the
// controller asks. The zero value allows everything. A refused instance is
// reported with phase Refused and never created.
type LocalPolicy struct {
	RefusePrivileged  bool
	RefuseHostNetwork bool
	RefuseHostPID     bool
	// RestrictHostPaths limits hostPath volumes to AllowedHostPaths: a path
	// is allowed when it equals one of them or lies beneath one. With
	// RestrictHostPaths set and no prefixes, every hostPath is refused.
	RestrictHostPaths bool
	AllowedHostPaths  []string
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
	reasons = append(reasons, p.privilegedReasons(t.Spec.Containers)...)
	reasons = append(reasons, p.hostPathReasons(t.Spec.Volumes)...)
	if len(reasons) == 0 {
		return nil
	}
	return fmt.Errorf("refused: %s", strings.Join(reasons, "; "))
}

func (p LocalPolicy) privilegedReasons(cs []schema.Container) []string {
	if !p.RefusePrivileged {
		return nil
	}
	var out []string
	for i, c := range cs {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			out = append(out, fmt.Sprintf("spec.containers[%d].securityContext.privileged (%s) is refused by local policy", i, c.Name))
		}
	}
	return out
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
	if !path.IsAbs(hostPath) {
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
