package schema

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The agent upgrades itself as a daemonset (docs/rollouts.md, "Upgrading
// the agent"): the reserved daemonset AgentDaemonSet names one agent
// binary per platform, and an agent that is told to run one of its
// revisions replaces its own binary with the one of its platform instead
// of starting a container. Placement, budgets, canaries, windows, pause,
// undo and the rollout status apply to it as to any daemonset.
//
// Its template says what to run:
//
//   - metadata.annotations[AnnotationAgentVersion]: the version the
//     binaries report (`edgeset-agent version`). Absent: the baseline
//     revision, which keeps whatever agent a node runs.
//   - one container per platform: its name is the platform
//     ("linux-amd64", "linux-arm64", "linux-arm-v7"), its image the
//     binary in the controller's image store, pushed as a one-layer image
//     whose layer is the binary itself;
//   - metadata.annotations[AnnotationAgentDigestPrefix+platform]: the
//     sha256 of that binary. A signed revision pins it, so the fleet's keys
//     sign the binary.
//   - optional AnnotationAgentTrialDeadline and AnnotationAgentTrialAttempts:
//     how long a new binary has to connect and receive its desired state,
//     and how many times it may start, before the agent returns to the
//     binary it replaced.
const (
	// AgentNamespace and AgentName name the reserved daemonset.
	AgentNamespace = "edgeset-system"
	AgentName      = "edgeset-agent"
	// AgentDaemonSet is its key.
	AgentDaemonSet = AgentNamespace + "/" + AgentName

	// AgentImageRepository is the repository of the binaries' images in
	// the controller's image store.
	AgentImageRepository = "edgeset.io/edgeset-agent"
	// AgentBaselineContainer is the only container of the baseline
	// revision, and AgentBaselineImage its image (never fetched).
	AgentBaselineContainer = "installed"
	AgentBaselineImage     = AgentImageRepository + ":installed"

	AnnotationAgentVersion       = "agent.edgeset.io/version"
	AnnotationAgentDigestPrefix  = "agent.edgeset.io/digest."
	AnnotationAgentTrialDeadline = "agent.edgeset.io/trial-deadline"
	AnnotationAgentTrialAttempts = "agent.edgeset.io/trial-attempts"

	// Defaults and bounds of the trial.
	DefaultAgentTrialDeadline = 5 * time.Minute
	DefaultAgentTrialAttempts = 3
	MinAgentTrialDeadline     = 5 * time.Second
	MaxAgentTrialDeadline     = 24 * time.Hour
	MaxAgentTrialAttempts     = 10
)

// AgentUpgrade is what a revision of the reserved daemonset asks agents
// to run.
type AgentUpgrade struct {
	// Version is what the binaries report; "" for the baseline revision.
	Version string
	// Binaries are by platform (AgentPlatform).
	Binaries map[string]AgentBinary
	// TrialDeadline is how long a new binary has, from each start, to
	// connect and receive its desired state.
	TrialDeadline time.Duration
	// TrialAttempts is how many times a new binary may start without
	// confirming before the agent returns to the old one.
	TrialAttempts int
}

// AgentBinary is one platform's binary.
type AgentBinary struct {
	// Image is its image in the controller's image store.
	Image string
	// Digest is the sha256 of the binary ("sha256:" and 64 hex digits),
	// also the digest of the image's only layer.
	Digest string
}

// Baseline reports whether u is the baseline revision: keep the agent
// that runs.
func (u AgentUpgrade) Baseline() bool { return u.Version == "" }

// Platforms returns the platforms of u's binaries, sorted.
func (u AgentUpgrade) Platforms() []string {
	out := make([]string, 0, len(u.Binaries))
	for p := range u.Binaries {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

var (
	agentPlatformRE = regexp.MustCompile(`^([a-z]+)-([a-z0-9]+)(?:-v([5-7]))?$`)
	agentVersionRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
)

// AgentPlatform names the platform of an agent binary: "linux-amd64",
// "linux-arm64", "linux-arm-v7" (goarm is the GOARM variant, only for
// arm; "" without one).
func AgentPlatform(goos, goarch, goarm string) string {
	p := goos + "-" + goarch
	if goarch == "arm" && goarm != "" {
		p += "-v" + goarm
	}
	return p
}

// SplitAgentPlatform returns the OS, architecture and arm variant of a
// platform name, and whether it is one.
func SplitAgentPlatform(p string) (goos, goarch, goarm string, ok bool) {
	m := agentPlatformRE.FindStringSubmatch(p)
	if m == nil || (m[3] != "" && m[2] != "arm") {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// DisplayAgentPlatform writes a platform as Docker does: linux/arm/v7.
func DisplayAgentPlatform(p string) string {
	goos, goarch, goarm, ok := SplitAgentPlatform(p)
	if !ok {
		return p
	}
	out := goos + "/" + goarch
	if goarm != "" {
		out += "/v" + goarm
	}
	return out
}

// ValidAgentVersion reports whether v may name an agent version: 1-128
// letters, digits, '.', '_', '+' and '-', starting with a letter or digit.
func ValidAgentVersion(v string) bool { return agentVersionRE.MatchString(v) }

// AgentBinaryImage is the name of a binary's image in the controller's
// image store: the version (characters a tag cannot hold replaced), the
// platform and the first 12 hex digits of the digest, so that two builds
// never share a name.
func AgentBinaryImage(version, platform, digest string) string {
	tag := strings.Map(func(r rune) rune {
		if r == '+' {
			return '-'
		}
		return r
	}, version)
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	suffix := "-" + platform + "-" + h
	if len(tag)+len(suffix) > 128 {
		tag = tag[:128-len(suffix)]
	}
	return AgentImageRepository + ":" + tag + suffix
}

// ParseAgentUpgrade reads the agent upgrade the template of a revision of
// AgentDaemonSet describes. Its error is a *ValidationError naming every
// problem by its field under spec.template.
func ParseAgentUpgrade(t PodTemplateSpec) (AgentUpgrade, error) {
	var errs fieldErrors
	u := parseAgentUpgrade(&errs, "spec.template", t)
	return u, errs.err()
}

func parseAgentUpgrade(errs *fieldErrors, field string, t PodTemplateSpec) AgentUpgrade {
	ann := t.Metadata.Annotations
	annField := func(key string) string { return field + ".metadata.annotations[" + key + "]" }
	u := AgentUpgrade{Version: ann[AnnotationAgentVersion], Binaries: map[string]AgentBinary{},
		TrialDeadline: DefaultAgentTrialDeadline, TrialAttempts: DefaultAgentTrialAttempts}
	if v, ok := ann[AnnotationAgentVersion]; ok && !ValidAgentVersion(v) {
		errs.add(annField(AnnotationAgentVersion), "invalid agent version %q: 1-128 letters, digits, '.', '_', '+' and '-', starting with a letter or digit", v)
	}
	u.TrialDeadline = parseTrialDeadline(errs, annField(AnnotationAgentTrialDeadline), ann)
	u.TrialAttempts = parseTrialAttempts(errs, annField(AnnotationAgentTrialAttempts), ann)
	spec := field + ".spec"
	if len(t.Spec.InitContainers) > 0 {
		errs.add(spec+".initContainers", "not allowed: the agent's daemonset runs no container, only the agent binary")
	}
	if len(t.Spec.Volumes) > 0 {
		errs.add(spec+".volumes", "not allowed: the agent's daemonset runs no container, only the agent binary")
	}
	if u.Baseline() {
		parseAgentBaseline(errs, spec, annField, t)
		return u
	}
	for i, c := range t.Spec.Containers {
		cf := fmt.Sprintf("%s.containers[%d]", spec, i)
		if _, _, _, ok := SplitAgentPlatform(c.Name); !ok {
			errs.add(cf+".name", "%q is not a platform such as linux-amd64, linux-arm64 or linux-arm-v7: each container of the agent's daemonset names the platform of one binary", c.Name)
			continue
		}
		key := AnnotationAgentDigestPrefix + c.Name
		d := ann[key]
		if err := checkSHA256(d); err != nil {
			errs.add(annField(key), "the digest of the %s binary: %v", c.Name, err)
		}
		u.Binaries[c.Name] = AgentBinary{Image: c.Image, Digest: d}
	}
	for _, k := range sortedKeys(ann) {
		if p, ok := strings.CutPrefix(k, AnnotationAgentDigestPrefix); ok && u.Binaries[p] == (AgentBinary{}) {
			errs.add(annField(k), "no container %q holds the binary of this digest", p)
		}
	}
	return u
}

// parseAgentBaseline checks the baseline revision: one container,
// AgentBaselineContainer, and no digests.
func parseAgentBaseline(errs *fieldErrors, spec string, annField func(string) string, t PodTemplateSpec) {
	if len(t.Spec.Containers) != 1 || t.Spec.Containers[0].Name != AgentBaselineContainer {
		errs.add(spec+".containers", "the baseline revision (no %s annotation) has one container, %q", AnnotationAgentVersion, AgentBaselineContainer)
	}
	for _, k := range sortedKeys(t.Metadata.Annotations) {
		if strings.HasPrefix(k, AnnotationAgentDigestPrefix) {
			errs.add(annField(k), "a binary without %s: name the version the binaries report", AnnotationAgentVersion)
		}
	}
}

func parseTrialDeadline(errs *fieldErrors, field string, ann map[string]string) time.Duration {
	v, ok := ann[AnnotationAgentTrialDeadline]
	if !ok {
		return DefaultAgentTrialDeadline
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinAgentTrialDeadline || d > MaxAgentTrialDeadline {
		errs.add(field, "invalid duration %q: between %s and %s, such as 5m", v, MinAgentTrialDeadline, MaxAgentTrialDeadline)
		return DefaultAgentTrialDeadline
	}
	return d
}

func parseTrialAttempts(errs *fieldErrors, field string, ann map[string]string) int {
	v, ok := ann[AnnotationAgentTrialAttempts]
	if !ok {
		return DefaultAgentTrialAttempts
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxAgentTrialAttempts {
		errs.add(field, "invalid count %q: from 1 to %d starts", v, MaxAgentTrialAttempts)
		return DefaultAgentTrialAttempts
	}
	return n
}

// checkSHA256 checks "sha256:" and 64 lowercase hex digits.
func checkSHA256(d string) error {
	h, ok := strings.CutPrefix(d, "sha256:")
	if _, err := hex.DecodeString(h); !ok || len(h) != 64 || strings.ToLower(h) != h || err != nil {
		return fmt.Errorf("%q is not sha256: and 64 lowercase hex digits", d)
	}
	return nil
}

// validateAgentDaemonSet checks the reserved daemonset: a template that
// describes an agent upgrade, and no surge (a node cannot run two
// agents).
func validateAgentDaemonSet(errs *fieldErrors, ds *DaemonSet) {
	if ds.Key() != AgentDaemonSet {
		return
	}
	parseAgentUpgrade(errs, "spec.template", ds.Spec.Template)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxSurge != nil && !isZero(ru.MaxSurge) {
		errs.add("spec.updateStrategy.rollingUpdate.maxSurge", "must be 0 for %s: a node runs one agent", AgentDaemonSet)
	}
}
