package docker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/test/testimage"
)

// TestKubeletLogsReadThroughLinks: what a container prints can be read, in
// the JSON lines log shippers parse, through the kubelet-style links made
// from the engine's own state.
func TestKubeletLogsReadThroughLinks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("klogs", "exit", "0")
	spec.Labels[edgeagent.LabelDaemonSet] = "logging/fluent-bit"
	spec.Labels[edgeagent.LabelPodName] = "fluent-bit-x7k2"
	spec.Labels[edgeagent.LabelPodUID] = "6f1c0b7e"
	spec.Labels[edgeagent.LabelContainer] = "fluent-bit"
	id := e.run(t, spec)
	e.waitExit(t, id)
	list, err := e.rt.List(t.Context(), e.node)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 1 || list[0].LogPath == "" {
		t.Fatalf("List = %+v, want one container with its log path", list)
	}
	if _, err := os.Stat(list[0].LogPath); err != nil {
		testimage.Unavailable(t, "the engine's log files are not readable here (a remote engine?): "+err.Error())
	}

	root := t.TempDir()
	k, err := edgeagent.NewKubeletLogs(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Sync(list, func(edgeagent.ContainerState) int { return 0 }); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	link := filepath.Join(root, "containers", "fluent-bit-x7k2_logging_fluent-bit-"+id+".log")
	b, err := os.ReadFile(link)
	if err != nil {
		t.Fatalf("read through %s: %v", link, err)
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var entry struct{ Log, Stream, Time string }
		if err := json.Unmarshal([]byte(l), &entry); err != nil || entry.Time == "" {
			t.Fatalf("log line %q is not the docker JSON format: %v", l, err)
		}
		lines = append(lines, entry.Stream+": "+entry.Log)
	}
	joined := strings.Join(lines, "")
	for _, want := range []string{"stdout: app: exiting with 0\n", "stderr: app: stderr exiting with 0\n"} {
		if !strings.Contains(joined, want) {
			t.Errorf("log through the link = %q, want %q", joined, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "logging_fluent-bit-x7k2_6f1c0b7e", "fluent-bit", "0.log")); err != nil {
		t.Errorf("pods/ link: %v", err)
	}
}
