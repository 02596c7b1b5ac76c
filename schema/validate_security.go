package schema

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// linuxCapabilities are the Linux capabilities (capability.h, CAP_CHOWN = 0
// to CAP_CHECKPOINT_RESTORE = 40), without their CAP_ prefix.
var linuxCapabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
	"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
	"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
	"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// CapabilityAll is the capability name that adds or drops every capability.
const CapabilityAll = "ALL"

// CapabilityName returns the canonical form of a capability as a manifest
// may write it: upper case without the CAP_ prefix ("net_admin" and
// "CAP_NET_ADMIN" are both "NET_ADMIN"; "all" is "ALL"), and whether it is
// a Linux capability or ALL. Container runtimes accept either case and
// prefix, so Kubernetes manifests use all of them.
func CapabilityName(s string) (string, bool) {
	c := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "CAP_")
	return c, c == CapabilityAll || slices.Contains(linuxCapabilities, c)
}

// sysctlRE is Kubernetes' sysctl name format: dot- or slash-separated
// segments of lowercase alphanumerics, '-' and '_'.
var sysctlRE = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// maxID is the largest user or group ID Kubernetes accepts.
const maxID = 1<<31 - 1

func validateID(errs *fieldErrors, field string, id *int64) {
	if id != nil && (*id < 0 || *id > maxID) {
		errs.add(field, "must be between 0 and %d, not %d", maxID, *id)
	}
}

// validateSecurityContext checks a container's securityContext.
func validateSecurityContext(errs *fieldErrors, field string, sc *SecurityContext) {
	validateID(errs, field+".runAsUser", sc.RunAsUser)
	validateID(errs, field+".runAsGroup", sc.RunAsGroup)
	if c := sc.Capabilities; c != nil {
		validateCapabilities(errs, field+".capabilities.add", c.Add)
		validateCapabilities(errs, field+".capabilities.drop", c.Drop)
	}
	validateSeccomp(errs, field+".seccompProfile", sc.SeccompProfile)
	if pm := sc.ProcMount; pm != nil && *pm != ProcMountDefault && *pm != ProcMountUnmasked {
		errs.add(field+".procMount", "unsupported value %q: want Default or Unmasked", *pm)
	}
	noEscalation := sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	if noEscalation && sc.Privileged != nil && *sc.Privileged {
		errs.add(field+".allowPrivilegeEscalation", "cannot be false in a privileged container, as in Kubernetes")
	}
	if noEscalation && sc.Capabilities != nil && slices.ContainsFunc(sc.Capabilities.Add, func(s string) bool {
		c, _ := CapabilityName(s)
		return c == "SYS_ADMIN"
	}) {
		errs.add(field+".allowPrivilegeEscalation", "cannot be false when capabilities.add has SYS_ADMIN, as in Kubernetes")
	}
}

func validateCapabilities(errs *fieldErrors, field string, caps []string) {
	for i, s := range caps {
		if _, ok := CapabilityName(s); !ok {
			errs.add(fmt.Sprintf("%s[%d]", field, i), "unknown capability %q: want ALL or a Linux capability such as NET_ADMIN (with or without CAP_)", s)
		}
	}
}

func validateSeccomp(errs *fieldErrors, field string, p *SeccompProfile) {
	if p == nil {
		return
	}
	switch p.Type {
	case SeccompLocalhost:
		switch lp := p.LocalhostProfile; {
		case lp == nil || *lp == "":
			errs.add(field+".localhostProfile", "required when type is Localhost")
		case path.IsAbs(*lp):
			errs.add(field+".localhostProfile", "must be a path relative to the device's seccomp profile directory, not %q", *lp)
		default:
			validateRelativePath(errs, field+".localhostProfile", *lp, false)
		}
	case SeccompRuntimeDefault, SeccompUnconfined:
		if p.LocalhostProfile != nil {
			errs.add(field+".localhostProfile", "only allowed when type is Localhost")
		}
	case "":
		errs.add(field+".type", "required: RuntimeDefault, Unconfined or Localhost")
	default:
		errs.add(field+".type", "unsupported type %q: want RuntimeDefault, Unconfined or Localhost", p.Type)
	}
}

// validatePodSecurityContext checks the pod-level securityContext.
func (pc *podCheck) validatePodSecurityContext(field string, sc *PodSecurityContext) {
	validateID(pc.errs, field+".runAsUser", sc.RunAsUser)
	validateID(pc.errs, field+".runAsGroup", sc.RunAsGroup)
	validateID(pc.errs, field+".fsGroup", sc.FSGroup)
	for i := range sc.SupplementalGroups {
		validateID(pc.errs, fmt.Sprintf("%s.supplementalGroups[%d]", field, i), &sc.SupplementalGroups[i])
	}
	if p := sc.FSGroupChangePolicy; p != nil && *p != "OnRootMismatch" && *p != "Always" {
		pc.add(field+".fsGroupChangePolicy", "unsupported value %q: want OnRootMismatch or Always", *p)
	}
	validateSeccomp(pc.errs, field+".seccompProfile", sc.SeccompProfile)
	names := map[string]bool{}
	for i, s := range sc.Sysctls {
		sf := fmt.Sprintf("%s.sysctls[%d].name", field, i)
		switch {
		case s.Name == "":
			pc.add(sf, "required")
		case len(s.Name) > 253 || !sysctlRE.MatchString(s.Name):
			pc.add(sf, "invalid sysctl name %q: must be dot- or slash-separated lowercase alphanumerics, '-' and '_', such as net.ipv4.ip_forward", s.Name)
		case names[strings.ReplaceAll(s.Name, "/", ".")]:
			pc.add(sf, "duplicate sysctl %q", s.Name)
		}
		names[strings.ReplaceAll(s.Name, "/", ".")] = true
	}
}
