package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for a writing child and a polling
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestRunDemoStopsCleanlyOnInterrupt runs `make run`'s script
// (configs/run-demo.sh, no Docker agent) and sends SIGINT to its process
// group, as Ctrl-C does: every part stops, nothing is reported as having
// exited unexpectedly, and the script exits 0.
func TestRunDemoStopsCleanlyOnInterrupt(t *testing.T) {
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
		"EDGESET_DEMO_DOCKER=0", "EDGESET_DEMO_NODES=2",
		"EDGESET_DEMO_API_ADDR="+freeAddr(t), "EDGESET_DEMO_MQTT_ADDR="+freeAddr(t))
	demo.Stdout, demo.Stderr = &output, &output
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, demo.Start())
	exited := make(chan error, 1)
	go func() { exited <- demo.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGKILL)
	})

	deadline := time.After(2 * time.Minute)
	for !strings.Contains(output.String(), "Ctrl-C stops everything") {
		select {
		case err := <-exited:
			t.Fatalf("run-demo.sh exited before it was up (%v):\n%s", err, output.String())
		case <-deadline:
			t.Fatalf("run-demo.sh not up after 2 minutes:\n%s", output.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.NoError(t, syscall.Kill(-demo.Process.Pid, syscall.SIGINT))
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("run-demo.sh still running a minute after SIGINT:\n%s", output.String())
	}
	assert.NoError(t, err, "exit status after Ctrl-C\n%s", output.String())
	assert.NotContains(t, output.String(), "exited unexpectedly")
	assert.Contains(t, output.String(), "run: stopped;")
}
