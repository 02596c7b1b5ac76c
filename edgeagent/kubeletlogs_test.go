package edgeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// podContainer is a container of pod fluent-bit-x7k2 (uid u-1) of
// daemonset logging/fluent-bit, with id and log file.
func podContainer(id, name, logPath string) ContainerState {
	return ContainerState{
		ID: id, LogPath: logPath, Running: true,
		Labels: map[string]string{
			LabelDaemonSet: "logging/fluent-bit", LabelPodName: "fluent-bit-x7k2",
			LabelPodUID: "u-1", LabelContainer: name,
		},
	}
}

func TestKubeletLinks(t *testing.T) {
	const root = "/var/log"
	zero := func(ContainerState) int { return 0 }
	withLabel := func(c ContainerState, k, v string) ContainerState {
		c.Labels[k] = v
		return c
	}
	old := podContainer("old", "fluent-bit", "/docker/old-json.log")
	old.Running, old.Created = false, time.Unix(100, 0)
	newer := podContainer("new", "fluent-bit", "/docker/new-json.log")
	newer.Running, newer.Created = false, time.Unix(200, 0)
	tests := []struct {
		name       string
		containers []ContainerState
		restarts   func(ContainerState) int
		want       []kubeletLink
	}{
		{"one container", []ContainerState{podContainer("abc", "fluent-bit", "/docker/abc-json.log")}, zero, []kubeletLink{
			{"containers/fluent-bit-x7k2_logging_fluent-bit-abc.log", "/var/log/pods/logging_fluent-bit-x7k2_u-1/fluent-bit/0.log"},
			{"pods/logging_fluent-bit-x7k2_u-1/fluent-bit/0.log", "/docker/abc-json.log"},
		}},
		{"restart count names the file", []ContainerState{podContainer("abc", "c", "/docker/abc-json.log")}, func(ContainerState) int { return 3 }, []kubeletLink{
			{"containers/fluent-bit-x7k2_logging_c-abc.log", "/var/log/pods/logging_fluent-bit-x7k2_u-1/c/3.log"},
			{"pods/logging_fluent-bit-x7k2_u-1/c/3.log", "/docker/abc-json.log"},
		}},
		{"no log file", []ContainerState{podContainer("abc", "c", "")}, zero, nil},
		{"relative log file", []ContainerState{podContainer("abc", "c", "abc-json.log")}, zero, nil},
		{"no pod name", []ContainerState{withLabel(podContainer("abc", "c", "/l"), LabelPodName, "")}, zero, nil},
		{"no pod uid", []ContainerState{withLabel(podContainer("abc", "c", "/l"), LabelPodUID, "")}, zero, nil},
		{"no daemonset", []ContainerState{withLabel(podContainer("abc", "c", "/l"), LabelDaemonSet, "")}, zero, nil},
		{"label escaping the layout", []ContainerState{withLabel(podContainer("abc", "c", "/l"), LabelContainer, "../../etc")}, zero, nil},
		{"dot-dot container", []ContainerState{withLabel(podContainer("abc", "c", "/l"), LabelContainer, "..")}, zero, nil},
		{"running wins a shared path", []ContainerState{newer, podContainer("run", "fluent-bit", "/docker/run-json.log")}, zero, []kubeletLink{
			{"containers/fluent-bit-x7k2_logging_fluent-bit-run.log", "/var/log/pods/logging_fluent-bit-x7k2_u-1/fluent-bit/0.log"},
			{"pods/logging_fluent-bit-x7k2_u-1/fluent-bit/0.log", "/docker/run-json.log"},
		}},
		{"then the newest", []ContainerState{old, newer}, zero, []kubeletLink{
			{"containers/fluent-bit-x7k2_logging_fluent-bit-new.log", "/var/log/pods/logging_fluent-bit-x7k2_u-1/fluent-bit/0.log"},
			{"pods/logging_fluent-bit-x7k2_u-1/fluent-bit/0.log", "/docker/new-json.log"},
		}},
		{"two containers of a pod", []ContainerState{podContainer("a1", "main", "/docker/a1"), podContainer("b2", "sidecar", "/docker/b2")}, zero, []kubeletLink{
			{"containers/fluent-bit-x7k2_logging_main-a1.log", "/var/log/pods/logging_fluent-bit-x7k2_u-1/main/0.log"},
			{"containers/fluent-bit-x7k2_logging_sidecar-b2.log", "/var/log/pods/logging_fluent-bit-x7k2_u-1/sidecar/0.log"},
			{"pods/logging_fluent-bit-x7k2_u-1/main/0.log", "/docker/a1"},
			{"pods/logging_fluent-bit-x7k2_u-1/sidecar/0.log", "/docker/b2"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, kubeletLinks(root, tc.containers, tc.restarts))
		})
	}
}

func TestKubeletLogsSync(t *testing.T) {
	engine := t.TempDir()
	logFile := filepath.Join(engine, "abc-json.log")
	const line = `{"log":"hello\n","stream":"stdout","time":"2026-12-01T09:00:00.000000000Z"}` + "\n"
	require.NoError(t, os.WriteFile(logFile, []byte(line), 0o600))
	root := filepath.Join(t.TempDir(), "var", "log")
	k, err := NewKubeletLogs(root)
	require.NoError(t, err)
	c := podContainer("abc", "fluent-bit", logFile)
	restarts := 0
	count := func(ContainerState) int { return restarts }

	containerLink := filepath.Join(root, "containers", "fluent-bit-x7k2_logging_fluent-bit-abc.log")
	podDir := filepath.Join(root, "pods", "logging_fluent-bit-x7k2_u-1")
	require.NoError(t, k.Sync([]ContainerState{c}, count))
	got, err := os.ReadFile(containerLink)
	require.NoError(t, err, "read through the containers/ link")
	assert.Equal(t, line, string(got))
	target, err := os.Readlink(filepath.Join(podDir, "fluent-bit", "0.log"))
	require.NoError(t, err)
	assert.Equal(t, logFile, target)

	// A stray regular file is not edgeset's: it stays.
	stray := filepath.Join(root, "containers", "not-a-link.log")
	require.NoError(t, os.WriteFile(stray, nil, 0o600))

	restarts = 1
	require.NoError(t, k.Sync([]ContainerState{c}, count))
	assert.NoFileExists(t, filepath.Join(podDir, "fluent-bit", "0.log"), "the previous restart's link is gone")
	target, err = os.Readlink(containerLink)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(podDir, "fluent-bit", "1.log"), target)
	got, err = os.ReadFile(containerLink)
	require.NoError(t, err)
	assert.Equal(t, line, string(got))

	require.NoError(t, k.Sync(nil, count), "the container is gone")
	_, err = os.Lstat(containerLink)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NoDirExists(t, podDir, "the emptied pod directory is removed")
	assert.DirExists(t, filepath.Join(root, "pods"))
	assert.FileExists(t, stray)
	assert.FileExists(t, logFile, "the engine's log is never touched")
}

func TestNewKubeletLogsMakesRootAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	k, err := NewKubeletLogs("logs")
	require.NoError(t, err)
	require.NoError(t, k.Sync([]ContainerState{podContainer("abc", "c", "/docker/abc-json.log")}, func(ContainerState) int { return 0 }))
	target, err := os.Readlink(filepath.Join("logs", "containers", "fluent-bit-x7k2_logging_c-abc.log"))
	require.NoError(t, err)
	assert.True(t, filepath.IsAbs(target), "target %s", target)
}

// TestAgentSyncsKubeletLogs: with KubeletLogDir set, the agent links its
// containers under the instance's restart count.
func TestAgentSyncsKubeletLogs(t *testing.T) {
	dir := t.TempDir()
	a, err := New(Config{NodeName: "n1", Ephemeral: true, KubeletLogDir: dir}, nil, nil)
	require.NoError(t, err)
	c := podContainer("abc", "fluent-bit", "/docker/abc-json.log")
	c.Labels[LabelRevision], c.Labels[LabelIndex] = "rev1", "0"
	a.tracker(instanceKey{DaemonSet: "logging/fluent-bit", Revision: "rev1"}).restarts = 2
	a.syncKubeletLogs([]ContainerState{c})
	target, err := os.Readlink(filepath.Join(dir, "pods", "logging_fluent-bit-x7k2_u-1", "fluent-bit", "2.log"))
	require.NoError(t, err)
	assert.Equal(t, "/docker/abc-json.log", target)

	off, err := New(Config{NodeName: "n1", Ephemeral: true}, nil, nil)
	require.NoError(t, err)
	assert.Nil(t, off.klogs, "no layout without KubeletLogDir")
}
