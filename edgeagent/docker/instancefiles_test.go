package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// filesTemplate mounts a ConfigMap (whole and one key by subPath), an
// emptyDir and a DirectoryOrCreate hostPath by subPath into a container
// that runs as nobody with every capability dropped.
func filesTemplate(image, hostDir, name string, args ...string) schema.PodTemplateSpec {
	nobody := int64(65534)
	return schema.PodTemplateSpec{Spec: schema.PodSpec{
		Volumes: []schema.Volume{
			{Name: "config", ConfigMap: &schema.ConfigMapVolumeSource{Name: "cfg"}},
			{Name: "scratch", EmptyDir: &schema.EmptyDirVolumeSource{}},
			{Name: "host", HostPath: &schema.HostPathVolumeSource{Path: hostDir, Type: schema.HostPathDirectoryOrCreate}},
		},
		Containers: []schema.Container{{Name: name, Image: image, Command: []string{"/app"}, Args: args,
			SecurityContext: &schema.SecurityContext{Capabilities: &schema.Capabilities{Drop: []string{"ALL"}}, RunAsUser: &nobody},
			VolumeMounts: []schema.VolumeMount{
				{Name: "config", MountPath: "/etc/app"},
				{Name: "config", MountPath: "/etc/single", SubPath: "single"},
				{Name: "scratch", MountPath: "/scratch"},
				{Name: "host", MountPath: "/host", SubPath: "sub"},
			}}},
	}}
}

// startInstance builds tmpl's first container with ic and starts it on rt.
func startInstance(t *testing.T, rt *docker.Runtime, ic edgeagent.InstanceContext, tmpl schema.PodTemplateSpec, node string) string {
	t.Helper()
	ctx := context.Background()
	spec, err := edgeagent.BuildInstance(ic, tmpl)
	require.NoError(t, err)
	s := spec.Containers[0]
	s.Labels[edgeagent.LabelNode] = node
	s.Labels[testimage.LabelTest] = node
	id, err := rt.Create(ctx, s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Remove(context.Background(), id) })
	require.NoError(t, rt.Start(ctx, id))
	return id
}

func waitExit(t *testing.T, rt *docker.Runtime, id string) int {
	t.Helper()
	code := 0
	checkfor.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		st, err := rt.Inspect(context.Background(), id)
		switch {
		case err != nil:
			return err
		case st.Running || st.FinishedAt.IsZero():
			return fmt.Errorf("container %s has not exited", id)
		}
		code = st.ExitCode
		return nil
	})
	return code
}

// TestInstanceFilesOnDocker runs what BuildInstance prepares on a real
// engine: the ConfigMap files are there and read-only, the subPath file
// too, the emptyDir is writable by any user, the hostPath subPath is as
// the kubelet would create it (root's, 0755), and the termination log is
// writable by any user; a ConfigMap change reaches a running container.
func TestInstanceFilesOnDocker(t *testing.T) {
	cli := testimage.RequireDocker(t)
	image := testimage.Build(t)
	node := testimage.Node(t, cli)
	rt, err := docker.New(context.Background(), docker.Options{})
	require.NoError(t, err)
	hostDir := filepath.Join(t.TempDir(), "new")
	cm := schema.ConfigMap{Metadata: schema.ObjectMeta{Name: "cfg"}, Data: map[string]string{"app.conf": "x", "single": "y"}}
	ic := edgeagent.InstanceContext{Node: node, DaemonSet: "edge/files", Revision: "0123456789abcdef0123", DataDir: t.TempDir(),
		ConfigMaps: map[string]schema.ConfigMap{"cfg": cm}}

	tests := []struct {
		name string
		args []string
		want int
	}{
		{"configmap file", []string{"check", "/etc/app/app.conf"}, 0},
		{"subPath file", []string{"check", "/etc/single"}, 0},
		{"configmap volume read-only", []string{"write", "/etc/app/new"}, 1},
		{"emptyDir writable by nobody", []string{"write", "/scratch/x"}, 0},
		{"hostPath subPath owned by root", []string{"write", "/host/sub/x"}, 1},
		{"termination log writable by nobody", []string{"write", "/dev/termination-log"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := startInstance(t, rt, ic, filesTemplate(image, hostDir, "c", tc.args...), node)
			assert.Equal(t, tc.want, waitExit(t, rt, id), "app %v", tc.args)
			require.NoError(t, rt.Remove(context.Background(), id))
		})
	}
	b, err := os.ReadFile(filepath.Join(ic.DataDir, "pods", ic.PodUID(), "containers", "c", "termination-log"))
	require.NoError(t, err)
	assert.Equal(t, "edgeset\n", string(b))

	t.Run("a ConfigMap change reaches the running container", func(t *testing.T) {
		id := startInstance(t, rt, ic, filesTemplate(image, hostDir, "long", "sleep"), node)
		code, _, err := rt.Exec(context.Background(), id, []string{"/app", "check", "/etc/app/added"})
		require.NoError(t, err)
		require.Equal(t, 1, code)
		cm.Data = map[string]string{"app.conf": "x", "single": "y", "added": "z"}
		ic.ConfigMaps = map[string]schema.ConfigMap{"cfg": cm}
		_, err = edgeagent.BuildInstance(ic, filesTemplate(image, hostDir, "long", "sleep"))
		require.NoError(t, err)
		code, _, err = rt.Exec(context.Background(), id, []string{"/app", "check", "/etc/app/added"})
		require.NoError(t, err)
		assert.Equal(t, 0, code, "the new key is visible without a restart")
	})
}
