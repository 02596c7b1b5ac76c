package docker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// TestAgentHostPathSymlinkEscapeIsHeld is the attack of issue 13 on a real
// engine: with --restrict-host-paths --allowed-host-paths /srv/allowed, one
// daemonset that may write /srv/allowed plants /srv/allowed/escape -> /
// (the symlink is the same bytes whoever writes it; the test writes it on
// the host), and a second mounts hostPath /srv/allowed/escape to get the
// host's root. The second is held, FailedMount, and never created; a
// hostPath through a symlink that stays inside the allowed path runs, and
// the engine binds the resolved path, which is what was checked.
func TestAgentHostPathSymlinkEscapeIsHeld(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	allowed := filepath.Join(root, "srv", "allowed")
	require.NoError(t, os.MkdirAll(filepath.Join(allowed, "real"), 0o755))
	cfg := h.config()
	cfg.Policy = edgeagent.LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{allowed}}
	h.start(cfg)
	h.connect()

	mount := func(path, at string) func(*schema.PodSpec) {
		return func(p *schema.PodSpec) {
			p.Volumes = []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: path}}}
			p.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "h", MountPath: at}}
		}
	}
	writer := revision("edge/writer", 1, appTemplate(h.e.image, []string{"sleep"}, mount(allowed, "/srv/allowed")))
	h.apply(1, writer)
	h.waitInstance(writer, runningReady)
	require.NoError(t, os.Symlink("/", filepath.Join(allowed, "escape")))
	require.NoError(t, os.Symlink("real", filepath.Join(allowed, "alias")))

	reader := revision("edge/reader", 1, appTemplate(h.e.image, []string{"check", "/host/etc/passwd"}, mount(filepath.Join(allowed, "escape"), "/host")))
	inside := revision("edge/inside", 1, appTemplate(h.e.image, []string{"sleep"}, mount(filepath.Join(allowed, "alias"), "/data")))
	h.apply(2, writer, reader, inside)
	st := h.waitInstance(reader, pendingWith("outside the allowed host paths"))
	assert.Empty(t, st.ContainerIDs, "no container of the escaping daemonset")
	in := h.waitInstance(inside, runningReady)

	got := h.waitManaged(onlyRevisions(writer, inside))
	for _, c := range got {
		assert.False(t, slices.ContainsFunc(c.Mounts, func(m container.MountPoint) bool { return m.Source == "/" }), "container %s binds /", c.Names)
	}
	info := inspectOrNil(t, h.e.cli, in.ContainerIDs[0])
	require.NotNil(t, info)
	var sources []string
	for _, m := range info.Mounts {
		if m.Destination == "/data" {
			sources = append(sources, m.Source)
		}
	}
	assert.Equal(t, []string{filepath.Join(allowed, "real")}, sources, "the engine binds the resolved, checked path")
	for _, m := range info.Mounts {
		assert.True(t, strings.HasPrefix(m.Source, root+"/") || strings.HasPrefix(m.Source, h.dir+"/"), fmt.Sprintf("mount source %s", m.Source))
	}
}
