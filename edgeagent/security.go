package edgeagent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// applySecurity maps the pod's and the container's securityContext onto s;
// a field the container sets wins over the pod's. seccompDir is where
// Localhost profiles live.
func applySecurity(s *ContainerSpec, p schema.PodSpec, c schema.Container, seccompDir string) error {
	pod := p.SecurityContext
	if pod == nil {
		pod = &schema.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &schema.SecurityContext{}
	}
	s.Privileged = isTrue(sc.Privileged)
	s.User = userOf(pick(sc.RunAsUser, pod.RunAsUser), pick(sc.RunAsGroup, pod.RunAsGroup))
	s.RunAsNonRoot = isTrue(pick(sc.RunAsNonRoot, pod.RunAsNonRoot))
	s.GroupAdd = groupsOf(pod)
	if sc.Capabilities != nil {
		s.CapAdd = capNames(sc.Capabilities.Add)
		s.CapDrop = capNames(sc.Capabilities.Drop)
	}
	s.ReadOnlyRootfs = isTrue(sc.ReadOnlyRootFilesystem)
	s.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	s.UnmaskedProc = sc.ProcMount != nil && *sc.ProcMount == schema.ProcMountUnmasked
	s.Sysctls = sysctlsOf(pod.Sysctls)
	profile := sc.SeccompProfile
	if profile == nil {
		profile = pod.SeccompProfile
	}
	var err error
	if s.Seccomp, err = seccompOf(profile, seccompDir); err != nil {
		return fmt.Errorf("securityContext.seccompProfile: %w", err)
	}
	return nil
}

func pick[T any](container, pod *T) *T {
	if container != nil {
		return container
	}
	return pod
}

// userOf is Docker's "uid[:gid]". A group without a user keeps the
// image's user: Docker cannot change only the primary group.
func userOf(uid, gid *int64) string {
	if uid == nil {
		return ""
	}
	if gid == nil {
		return strconv.FormatInt(*uid, 10)
	}
	return strconv.FormatInt(*uid, 10) + ":" + strconv.FormatInt(*gid, 10)
}

// groupsOf returns fsGroup then supplementalGroups, without duplicates.
func groupsOf(pod *schema.PodSecurityContext) []string {
	var out []string
	add := func(g int64) {
		s := strconv.FormatInt(g, 10)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if pod.FSGroup != nil {
		add(*pod.FSGroup)
	}
	for _, g := range pod.SupplementalGroups {
		add(g)
	}
	return out
}

// capNames strips a CAP_ prefix and upper-cases; ALL stays ALL.
func capNames(caps []string) []string {
	if len(caps) == 0 {
		return nil
	}
	out := make([]string, len(caps))
	for i, c := range caps {
		c = strings.ToUpper(c)
		out[i] = strings.TrimPrefix(c, "CAP_")
	}
	return out
}

func sysctlsOf(in []schema.Sysctl) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for _, s := range in {
		out[s.Name] = s.Value
	}
	return out
}

// seccompOf maps a profile: unset or RuntimeDefault is the engine's
// default (""), Unconfined is "unconfined", Localhost the absolute path of
// the profile under dir (which it may not leave).
func seccompOf(p *schema.SeccompProfile, dir string) (string, error) {
	if p == nil {
		return "", nil
	}
	switch p.Type {
	case "", schema.SeccompRuntimeDefault:
		return "", nil
	case schema.SeccompUnconfined:
		return "unconfined", nil
	case schema.SeccompLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return "", fmt.Errorf("localhostProfile: required with type Localhost")
		}
		rel := *p.LocalhostProfile
		if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("localhostProfile: %q must be a relative path inside %s", rel, dir)
		}
		return filepath.Join(dir, rel), nil
	}
	return "", fmt.Errorf("type: unsupported %q", p.Type)
}
