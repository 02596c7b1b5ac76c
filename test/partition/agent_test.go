package partition

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
)

const agentPackage = "github.com/edgeset/edgeset/cmd/edgeset-agent"

// buildAgent compiles the agent binary into a temporary directory.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edgeset-agent")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, agentPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", agentPackage, out)
	return bin
}

// agentProc is the agent binary running inside the test's namespace.
type agentProc struct {
	cmd    *exec.Cmd
	log    string        // its stdout and stderr
	exited chan struct{} // closed once the process has been reaped
	err    error         // Wait's result, set before exited is closed
}

// startAgent runs the agent binary for node inside ns on the Docker
// runtime, with a short keepalive and the resource-pressure conditions
// off (the machine is shared). Cleanup stops it with SIGTERM, or SIGKILL
// when it does not exit, and logs its output if the test failed.
func startAgent(t *testing.T, ns *netns, bin string, ctl *fleetController, node string) *agentProc {
	t.Helper()
	a := &agentProc{log: filepath.Join(t.TempDir(), "agent.log"), exited: make(chan struct{})}
	logFile, err := os.Create(a.log)
	require.NoError(t, err)
	defer logFile.Close()
	logLevel := "info"
	if os.Getenv("EDGESET_TEST_LOG") != "" {
		logLevel = "debug"
	}
	a.cmd = exec.Command("ip", "netns", "exec", ns.name, bin,
		"--node-name", node,
		"--broker-url", ctl.brokerURL,
		"--token", credential.NodeToken(ctl.secret, node),
		"--data-dir", t.TempDir(),
		"--runtime", "docker",
		"--keepalive", keepAlive,
		"--disk-min-free", "0", "--disk-min-free-percent", "0",
		"--memory-min-available", "0", "--pid-max-percent", "0",
		"--log-level", logLevel,
	)
	a.cmd.Stdout, a.cmd.Stderr = logFile, logFile
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, a.cmd.Start())
	go func() {
		a.err = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// requireAlive fails the test if the agent process has exited.
func (a *agentProc) requireAlive(t *testing.T) {
	t.Helper()
	select {
	case <-a.exited:
		t.Fatalf("agent exited: %v\n%s", a.err, a.output())
	default:
	}
}

// stop terminates the agent and waits for it.
func (a *agentProc) stop(t *testing.T) {
	select {
	case <-a.exited:
	default:
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(stopTimeout):
			t.Errorf("agent did not exit %s after SIGTERM; killing it", stopTimeout)
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	}
	if t.Failed() || os.Getenv("EDGESET_TEST_LOG") != "" {
		t.Logf("agent output:\n%s", a.output())
	}
}

// output returns what the agent printed.
func (a *agentProc) output() string {
	b, err := os.ReadFile(a.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
