package edgeagent

import (
	"cmp"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// TestRestrictedHostPathsResolveInsideTheAllowlist: the allowlist is
// checked on the manifest's path, but the engine binds (and the agent
// creates, for DirectoryOrCreate and FileOrCreate) wherever it resolves.
// A container that may write an allowed directory can plant a symlink
// there to anywhere on the device; a later hostPath through it must be
// held, and nothing created outside the allowed paths.
func TestRestrictedHostPathsResolveInsideTheAllowlist(t *testing.T) {
	root := t.TempDir()
	allowed, outside := filepath.Join(root, "allowed"), filepath.Join(root, "etc")
	require.NoError(t, os.MkdirAll(allowed, 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(allowed, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "cron.d"), filepath.Join(allowed, "dangling")))
	policy := LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{allowed}}

	for _, tc := range []struct{ name, path, typ string }{
		{"DirectoryOrCreate through a symlink", filepath.Join(allowed, "link", "new"), schema.HostPathDirectoryOrCreate},
		{"FileOrCreate on a dangling symlink", filepath.Join(allowed, "dangling"), schema.HostPathFileOrCreate},
		{"DirectoryOrCreate on a dangling symlink", filepath.Join(allowed, "dangling"), schema.HostPathDirectoryOrCreate},
		{"an existing directory through a symlink", filepath.Join(allowed, "link"), schema.HostPathUnset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
				Volumes:    []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: tc.path, Type: tc.typ}}},
				Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "h", MountPath: "/h"}}}},
			}}
			require.NoError(t, policy.Check(tmpl), "lexically inside the allowlist")
			ic := testContext()
			ic.DataDir = t.TempDir()
			ic.Policy = policy
			_, err := BuildInstance(ic, tmpl)
			var me *mountError
			require.ErrorAs(t, err, &me)
			assert.ErrorContains(t, err, "outside the allowed host paths")
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing created outside the allowed paths")
		})
	}

	t.Run("symlinks inside the allowlist, and allowed prefixes that are symlinks, are fine", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(allowed, "real"), 0o755))
		require.NoError(t, os.Symlink("real", filepath.Join(allowed, "alias")))
		varRun := filepath.Join(root, "var-run")
		require.NoError(t, os.Symlink(allowed, varRun)) // as /var/run -> /run
		for _, tc := range []struct {
			allow, path string
		}{
			{allowed, filepath.Join(allowed, "alias", "sub")},
			{varRun, filepath.Join(varRun, "alias", "sub2")},
			{varRun, filepath.Join(allowed, "alias", "sub3")},
		} {
			ic := testContext()
			ic.DataDir = t.TempDir()
			ic.Policy = LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{tc.allow}}
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
				Volumes:    []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: tc.path, Type: schema.HostPathDirectoryOrCreate}}},
				Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "h", MountPath: "/h"}}}},
			}}
			_, err := BuildInstance(ic, tmpl)
			require.NoError(t, err, tc.path)
			assert.DirExists(t, filepath.Join(allowed, "real", filepath.Base(tc.path)))
		}
	})
}

// TestRestrictedHostPathsWithoutDataDir: an agent without a data dir
// (Ephemeral) prepares no file, but its hostPath volumes are still held
// when they resolve outside the allowlist, and bound where they resolve.
func TestRestrictedHostPathsWithoutDataDir(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	allowed, outside := filepath.Join(root, "allowed"), filepath.Join(root, "etc")
	require.NoError(t, os.MkdirAll(filepath.Join(allowed, "real"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(allowed, "escape")))
	require.NoError(t, os.Symlink("real", filepath.Join(allowed, "alias")))
	build := func(path string) (InstanceSpec, error) {
		ic := testContext()
		ic.Policy = LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{allowed}}
		return BuildInstance(ic, schema.PodTemplateSpec{Spec: schema.PodSpec{
			Volumes:    []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: path}}},
			Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "h", MountPath: "/h"}}}},
		}})
	}
	_, err = build(filepath.Join(allowed, "escape"))
	var me *mountError
	require.ErrorAs(t, err, &me)
	assert.ErrorContains(t, err, "outside the allowed host paths")

	spec, err := build(filepath.Join(allowed, "alias"))
	require.NoError(t, err)
	require.Len(t, spec.Containers[0].Mounts, 1)
	assert.Equal(t, filepath.Join(allowed, "real"), spec.Containers[0].Mounts[0].Source)
}

// TestRestrictedHostPathDotDotAfterASymlink: "link/.." is where the
// kernel resolves it (the parent of link's target), not where a lexical
// clean puts it (the directory holding link). A path such as
// allowed/link/../new, with link planted to outside/sub, must be held
// before anything is created: DirectoryOrCreate or FileOrCreate would
// otherwise make outside/new on the device. As in Kubernetes, a hostPath
// with a ".." component is refused, by the agent as by validation.
func TestRestrictedHostPathDotDotAfterASymlink(t *testing.T) {
	root := t.TempDir()
	allowed, outside := filepath.Join(root, "allowed"), filepath.Join(root, "etc")
	require.NoError(t, os.MkdirAll(allowed, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "sub"), filepath.Join(allowed, "link")))
	policy := LocalPolicy{RestrictHostPaths: true, AllowedHostPaths: []string{allowed}}
	for _, typ := range []string{schema.HostPathDirectoryOrCreate, schema.HostPathFileOrCreate, schema.HostPathUnset} {
		t.Run(cmp.Or(typ, "unset"), func(t *testing.T) {
			path := allowed + "/link/../new"
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
				Volumes:    []schema.Volume{{Name: "h", HostPath: &schema.HostPathVolumeSource{Path: path, Type: typ}}},
				Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "h", MountPath: "/h"}}}},
			}}
			ic := testContext()
			ic.DataDir = t.TempDir()
			ic.Policy = policy
			_, err := BuildInstance(ic, tmpl)
			require.Error(t, err)
			assert.ErrorContains(t, err, "..")
			assert.NoFileExists(t, filepath.Join(outside, "new"), "nothing created outside the allowed paths")
			assert.NoDirExists(t, filepath.Join(outside, "new"), "nothing created outside the allowed paths")
		})
	}
}
