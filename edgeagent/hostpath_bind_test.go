package edgeagent_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// TestHostPathBindSourceIsTheCheckedPath: the allowlist check resolves a
// hostPath's symlinks, but the engine was given the manifest's path and
// resolved it again when it mounted, so a container that can write an
// allowed directory could swap a checked directory for a symlink to "/"
// in between. The bind source the runtime gets is the path that was
// checked, every symlink resolved, for the volume root and for a subPath.
func TestHostPathBindSourceIsTheCheckedPath(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	allowed := filepath.Join(root, "allowed")
	require.NoError(t, os.MkdirAll(filepath.Join(allowed, "real", "sub"), 0o755))
	require.NoError(t, os.Symlink("real", filepath.Join(allowed, "alias")))

	h := newHarness(t)
	var mu sync.Mutex
	var started []edgeagent.ContainerSpec
	h.rt.StartFailure = func(spec edgeagent.ContainerSpec) error {
		mu.Lock()
		started = append(started, spec)
		mu.Unlock()
		return nil
	}
	cfg := h.config()
	cfg.Policy = edgeagent.LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{allowed}}
	h.start(cfg)
	h.connect()
	rev := testRevision("default/hp", testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Volumes = []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: filepath.Join(allowed, "alias")}}}
		p.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "h", MountPath: "/h"}, {Name: "h", MountPath: "/s", SubPath: "sub"}}
	}))
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, started, 1)
	sources := map[string]string{}
	for _, m := range started[0].Mounts {
		sources[m.Target] = m.Source
	}
	assert.Equal(t, filepath.Join(allowed, "real"), sources["/h"], "the volume root is bound where it resolved")
	assert.Equal(t, filepath.Join(allowed, "real", "sub"), sources["/s"], "a subPath is bound where it resolved")
}

// TestHostPathSymlinkPlantedByAContainerIsRefused is the attack
// with a fake runtime: one daemonset writes /srv/allowed/escape -> / from
// inside its container (here: the test plants it), a second mounts
// hostPath /srv/allowed/escape. It is held (FailedMount), never started,
// and nothing outside the allowed paths is bound.
func TestHostPathSymlinkPlantedByAContainerIsRefused(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	allowed := filepath.Join(root, "srv", "allowed")
	require.NoError(t, os.MkdirAll(allowed, 0o755))

	h := newHarness(t)
	var mu sync.Mutex
	var sources []string
	h.rt.StartFailure = func(spec edgeagent.ContainerSpec) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range spec.Mounts {
			sources = append(sources, m.Source)
		}
		return nil
	}
	cfg := h.config()
	cfg.Policy = edgeagent.LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{allowed}}
	h.start(cfg)
	h.connect()
	writer := testRevision("default/writer", testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Volumes = []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: allowed}}}
		p.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "h", MountPath: "/srv/allowed"}}
	}))
	h.apply(1, writer)
	h.waitInstance(writer.DaemonSet, writer.Hash, runningReady)
	require.NoError(t, os.Symlink("/", filepath.Join(allowed, "escape"))) // ln -s / /srv/allowed/escape, in the container

	reader := testRevision("default/reader", testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Volumes = []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: filepath.Join(allowed, "escape")}}}
		p.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "h", MountPath: "/host"}}
	}))
	h.apply(2, writer, reader)
	h.waitInstance(reader.DaemonSet, reader.Hash, pendingWith("outside the allowed host paths"))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, sources)
	for _, s := range sources {
		inside := func(dir string) bool { rel, err := filepath.Rel(dir, s); return err == nil && filepath.IsLocal(rel) }
		assert.True(t, inside(allowed) || inside(h.dir), "bound %s, outside the allowed paths and the data dir", s)
	}
}
