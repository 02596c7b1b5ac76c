package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunDemoFleetPastTheSourceCap: `EDGESET_DEMO_NODES=101 make run`
// comes up. Its simulated devices all dial from 127.0.0.1, one more than
// the broker's default cap per source address (mqtt-max-connections-per-
// source, 100), so the script must exempt loopback; without it the last
// device is refused at accept and the script times out waiting for it.
func TestRunDemoFleetPastTheSourceCap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "./cmd/edgeset-controller", "./cmd/edgeset-sim", "./cmd/edgesetctl")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	var output lockedBuffer
	demo := exec.Command("bash", filepath.Join(root, "configs", "run-demo.sh"))
	demo.Dir = t.TempDir()
	demo.Env = append(os.Environ(), "BIN="+bin, "DATA_DIR="+filepath.Join(demo.Dir, "data"),
		"EDGESET_DEMO_DOCKER=0", "EDGESET_DEMO_NODES=101", "EDGESET_DEMO_APPLY=0",
		"EDGESET_DEMO_API_ADDR="+freeAddr(t), "EDGESET_DEMO_MQTT_ADDR="+freeAddr(t))
	demo.Stdout, demo.Stderr = &output, &output
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, demo.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = demo.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-demo.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	deadline := time.After(2 * time.Minute)
	for !strings.Contains(output.String(), "101 nodes online") {
		select {
		case <-exited:
			t.Fatalf("run-demo.sh exited before 101 nodes were online (%v):\n%s", waitErr, output.String())
		case <-deadline:
			t.Fatalf("run-demo.sh: 101 nodes not online after 2 minutes:\n%s", output.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
