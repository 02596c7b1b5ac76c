package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunDemoInterruptedInTheBackground: run-demo.sh started as a
// background job of a non-interactive shell (`configs/run-demo.sh &` in a
// script, CI, nohup) has SIGINT ignored from the start, so bash cannot trap
// it; a SIGINT to its process group still stops the children, which exit
// 0. The script must report that as a stop and exit 0, not as
// "controller exited unexpectedly" with exit 1.
func TestRunDemoInterruptedInTheBackground(t *testing.T) {
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
	// trap "" INT: the script starts with SIGINT ignored, as bash starts
	// every background job when job control is off.
	demo := exec.Command("bash", "-c", `trap "" INT; exec bash "$0"`, filepath.Join(root, "configs", "run-demo.sh"))
	demo.Dir = t.TempDir()
	demo.Env = append(os.Environ(), "BIN="+bin, "DATA_DIR="+filepath.Join(demo.Dir, "data"),
		"EDGESET_DEMO_DOCKER=0", "EDGESET_DEMO_NODES=2", "EDGESET_DEMO_APPLY=0",
		"EDGESET_DEMO_API_ADDR="+freeAddr(t), "EDGESET_DEMO_MQTT_ADDR="+freeAddr(t))
	demo.Stdout, demo.Stderr = &output, &output
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, demo.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = demo.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	deadline := time.After(2 * time.Minute)
	for !strings.Contains(output.String(), "Ctrl-C stops everything") {
		select {
		case <-exited:
			t.Fatalf("run-demo.sh exited before it was up (%v):\n%s", waitErr, output.String())
		case <-deadline:
			t.Fatalf("run-demo.sh not up after 2 minutes:\n%s", output.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.NoError(t, syscall.Kill(-demo.Process.Pid, syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("run-demo.sh still running a minute after SIGINT:\n%s", output.String())
	}
	assert.NoError(t, waitErr, "exit status after SIGINT\n%s", output.String())
	assert.NotContains(t, output.String(), "exited unexpectedly")
	assert.Contains(t, output.String(), "run: stopped;")
}
