package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// Security options the engine understands. The key=value spelling is the
// daemon's own; key:value is deprecated there.
const (
	optNoNewPrivileges = "no-new-privileges=true"
	optSeccomp         = "seccomp="
	seccompUnconfined  = "unconfined"
)

// applySecurity sets the security context of spec on host: supplementary
// groups, capabilities, read-only root, security options, sysctls and the
// /proc paths.
func applySecurity(host *container.HostConfig, spec edgeagent.ContainerSpec) error {
	opts, err := securityOpts(spec)
	if err != nil {
		return err
	}
	host.SecurityOpt = opts
	host.GroupAdd = slices.Clone(spec.GroupAdd)
	host.CapAdd = capabilities(spec.CapAdd)
	host.CapDrop = capabilities(spec.CapDrop)
	host.ReadonlyRootfs = spec.ReadOnlyRootfs
	host.Sysctls = maps.Clone(spec.Sysctls)
	if spec.UnmaskedProc {
		// What the docker CLI sends for --security-opt systempaths=unconfined
		// (the daemon does not know that option): empty, non-nil lists
		// replace the engine's default masked and read-only /proc paths.
		host.MaskedPaths = []string{}
		host.ReadonlyPaths = []string{}
	}
	return nil
}

// securityOpts returns the engine's SecurityOpt for spec: no-new-privileges
// and the seccomp profile. A Localhost profile is sent as its JSON content
// (the engine API takes the profile, not a path, as the docker CLI does); a
// file that cannot be read or is not JSON is an error naming it.
func securityOpts(spec edgeagent.ContainerSpec) ([]string, error) {
	var opts []string
	if spec.NoNewPrivileges {
		opts = append(opts, optNoNewPrivileges)
	}
	switch spec.Seccomp {
	case "":
	case seccompUnconfined:
		opts = append(opts, optSeccomp+seccompUnconfined)
	default:
		profile, err := seccompProfile(spec.Seccomp)
		if err != nil {
			return nil, err
		}
		opts = append(opts, optSeccomp+profile)
	}
	return opts, nil
}

// seccompProfile reads the profile file at path and returns it compacted.
func seccompProfile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "", fmt.Errorf("seccomp profile %s: not JSON: %w", path, err)
	}
	return buf.String(), nil
}

// capabilities returns names in the engine's spelling (upper case, no CAP_
// prefix, ALL kept); nil stays nil.
func capabilities(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i], _ = schema.CapabilityName(n)
	}
	return out
}

// verifyNonRoot refuses spec (runAsNonRoot) when its container would run as
// root, consulting the image's configured user when spec.User sets no uid.
func (r *Runtime) verifyNonRoot(ctx context.Context, spec edgeagent.ContainerSpec) error {
	if _, set, err := userID(spec.User); err != nil || set {
		return checkNonRoot(spec.User, "")
	}
	img, err := r.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("runAsNonRoot: inspect image %s: %w", spec.Image, err)
	}
	var user string
	if img.Config != nil {
		user = img.Config.User
	}
	return checkNonRoot(spec.User, user)
}

// nonRootError is a runAsNonRoot refusal in Kubernetes' words; it matches
// edgeagent.ErrRunAsRoot with errors.Is.
type nonRootError struct{ msg string }

func (e *nonRootError) Error() string        { return e.msg }
func (e *nonRootError) Is(target error) bool { return target == edgeagent.ErrRunAsRoot }

// checkNonRoot decides runAsNonRoot as the kubelet does: a uid in specUser
// (runAsUser) decides alone, uid 0 being refused; otherwise the image's
// user decides: empty or uid 0 runs as root, a name cannot be verified
// (not even "root" is looked up). Both refusals match edgeagent.ErrRunAsRoot.
func checkNonRoot(specUser, imageUser string) error {
	uid, set, err := userID(specUser)
	if err != nil {
		return fmt.Errorf("user %q: %w", specUser, err)
	}
	if set {
		if uid == 0 {
			return &nonRootError{"container's runAsUser breaks non-root policy"}
		}
		return nil
	}
	uid, set, err = userID(imageUser)
	switch {
	case err != nil:
		return &nonRootError{fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root", userPart(imageUser))}
	case !set || uid == 0:
		return &nonRootError{edgeagent.ErrRunAsRoot.Error()}
	}
	return nil
}

// userID parses the user part of "user[:group]": set is false when it is
// empty, err non-nil when it is not a number.
func userID(user string) (uid uint64, set bool, err error) {
	u := userPart(user)
	if u == "" {
		return 0, false, nil
	}
	uid, err = strconv.ParseUint(u, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("non-numeric user %q", u)
	}
	return uid, true, nil
}

// userPart is user without its ":group".
func userPart(user string) string {
	u, _, _ := strings.Cut(user, ":")
	return u
}
