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

// demoRun is configs/run-demo.sh running in its own process group, with
// no Docker agent and nothing applied.
type demoRun struct {
	t       *testing.T
	cmd     *exec.Cmd
	output  lockedBuffer
	exited  chan struct{}
	waitErr error // set once exited is closed
}

// startDemo builds the binaries and starts the script with env added;
// ignoreINT starts it with SIGINT ignored, as bash starts every background
// job when job control is off. The cleanup kills what is left.
func startDemo(t *testing.T, ignoreINT bool, env ...string) *demoRun {
	t.Helper()
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

	script := filepath.Join(root, "configs", "run-demo.sh")
	d := &demoRun{t: t, cmd: exec.Command("bash", script), exited: make(chan struct{})}
	if ignoreINT {
		d.cmd = exec.Command("bash", "-c", `trap "" INT; exec bash "$0"`, script)
	}
	d.cmd.Dir = t.TempDir()
	d.cmd.Env = append(append(os.Environ(), "BIN="+bin, "DATA_DIR="+filepath.Join(d.cmd.Dir, "data"),
		"EDGESET_DEMO_DOCKER=0", "EDGESET_DEMO_APPLY=0",
		"EDGESET_DEMO_API_ADDR="+freeAddr(t), "EDGESET_DEMO_MQTT_ADDR="+freeAddr(t)), env...)
	d.cmd.Stdout, d.cmd.Stderr = &d.output, &d.output
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, d.cmd.Start())
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	})
	return d
}

// waitFor waits until the script has printed want.
func (d *demoRun) waitFor(want string) {
	d.t.Helper()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(d.output.String(), want) {
		select {
		case <-d.exited:
			d.t.Fatalf("run-demo.sh exited before printing %q (%v):\n%s", want, d.waitErr, d.output.String())
		case <-deadline:
			d.t.Fatalf("run-demo.sh did not print %q within 2 minutes:\n%s", want, d.output.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestRunDemoFleetPastTheSourceCap: `EDGESET_DEMO_NODES=101 make run`
// comes up. Its simulated devices all dial from 127.0.0.1, one more than
// the broker's default cap per source address (mqtt-max-connections-per-
// source, 100), so the script must exempt loopback; without it the last
// device is refused at accept and the script times out waiting for it.
func TestRunDemoFleetPastTheSourceCap(t *testing.T) {
	startDemo(t, false, "EDGESET_DEMO_NODES=101").waitFor("101 nodes online")
}

// TestRunDemoInterruptedInTheBackground: run-demo.sh started as a
// background job of a non-interactive shell (`configs/run-demo.sh &` in a
// script, CI, nohup) has SIGINT ignored from the start, so bash cannot trap
// it; a SIGINT to its process group still stops the children, which exit
// 0. The script must report that as a stop and exit 0, not as
// "controller exited unexpectedly" with exit 1.
func TestRunDemoInterruptedInTheBackground(t *testing.T) {
	d := startDemo(t, true, "EDGESET_DEMO_NODES=2")
	d.waitFor("Ctrl-C stops everything")
	require.NoError(t, syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT))
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		t.Fatalf("run-demo.sh still running a minute after SIGINT:\n%s", d.output.String())
	}
	assert.NoError(t, d.waitErr, "exit status after SIGINT\n%s", d.output.String())
	assert.NotContains(t, d.output.String(), "exited unexpectedly")
	assert.Contains(t, d.output.String(), "run: stopped;")
}
