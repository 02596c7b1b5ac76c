package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// buildAgentVersion compiles the agent with schema.Version set to
// version, as make cross does with the release's version.
func buildAgentVersion(t *testing.T, version string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edgeset-agent-"+version)
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/edgeset/edgeset/schema.Version="+version, "-o", bin, agentPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", agentPackage, out)
	return bin
}

// linkCutter is a TCP proxy to the broker whose link the test can cut:
// while down it closes every connection and refuses new ones, as a dead
// site link does.
type linkCutter struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex // guards down and conns
	down  bool
	conns map[net.Conn]bool
}

func newLinkCutter(t *testing.T, target string) *linkCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &linkCutter{ln: ln, target: target, conns: map[net.Conn]bool{}}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		l.setDown(true)
		l.wg.Wait()
	})
	return l
}

func (l *linkCutter) url() string { return "tcp://" + l.ln.Addr().String() }

func (l *linkCutter) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil || !l.track(c, up) {
			_ = c.Close()
			if up != nil {
				_ = up.Close()
			}
			continue
		}
		l.wg.Add(2)
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

// track registers a proxied pair, unless the link is down.
func (l *linkCutter) track(a, b net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return false
	}
	l.conns[a], l.conns[b] = true, true
	return true
}

func (l *linkCutter) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// setDown cuts (true) or restores (false) the link.
func (l *linkCutter) setDown(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
	if !down {
		return
	}
	for c := range l.conns {
		_ = c.Close()
	}
	l.conns = map[net.Conn]bool{}
}

// supervised runs an agent binary the way systemd runs the unit: started
// again from the same path whenever it exits (RestartSec shortened), so
// that a binary the agent swapped in is what starts next.
type supervised struct {
	node string
	bin  string
	args []string
	log  string
	// beforeStart is called with the digest of the binary about to start.
	beforeStart func(digest string)

	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex // guards exits and cmd
	exits []int
	cmd   *exec.Cmd
}

func supervise(t *testing.T, node, bin string, args []string, beforeStart func(string)) *supervised {
	s := &supervised{node: node, bin: bin, args: args, log: filepath.Join(t.TempDir(), node+".log"),
		beforeStart: beforeStart, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop(t)
	t.Cleanup(func() {
		s.shutdown()
		if t.Failed() {
			b, _ := os.ReadFile(s.log)
			t.Logf("agent %s output:\n%s", node, b)
		}
	})
	return s
}

func (s *supervised) loop(t *testing.T) {
	defer close(s.done)
	restart := time.NewTimer(0)
	defer restart.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-restart.C:
		}
		code, err := s.runOnce()
		if err != nil {
			t.Errorf("agent %s: %v", s.node, err)
			return
		}
		s.mu.Lock()
		s.exits = append(s.exits, code)
		s.mu.Unlock()
		restart.Reset(100 * time.Millisecond) // RestartSec
	}
}

// runOnce starts the binary at s.bin and waits for it to exit.
func (s *supervised) runOnce() (int, error) {
	digest, err := fileSHA256(s.bin)
	if err != nil {
		return 0, err
	}
	if s.beforeStart != nil {
		s.beforeStart(digest)
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.mu.Lock()
	select {
	case <-s.stop:
		s.mu.Unlock()
		return 0, nil
	default:
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.cmd = cmd
	s.mu.Unlock()
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return 0, err
	}
	return cmd.ProcessState.ExitCode(), nil
}

func (s *supervised) shutdown() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	if s.cmd != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
	<-s.done
}

// exitCodes returns how each run so far ended.
func (s *supervised) exitCodes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.exits...)
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// agentColumn returns the AGENT column of node in `get nodes -o wide`.
func agentColumn(t *testing.T, c cli, node string) string {
	out := c.ok("get", "nodes", "-o", "wide")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(node) + `\s+\S+\s+\S+\s+\S+\s+(\S+)\s`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestAgentUpgradesItself runs three real agents of build v1 under a
// supervisor that restarts them as systemd does, on a controller that
// signs what it publishes (the agents pin the fleet root). agent upgrade
// rolls build v2 out: every node ends on v2, each agent having restarted
// once into it. Then build v3 goes out while every node that starts v3
// has its broker link cut: the first node's v3 cannot connect within its
// trial deadline and rolls itself back to v2, the rollout reports the
// failure and pauses, and no other node is touched.
func TestAgentUpgradesItself(t *testing.T) {
	builds := map[string]string{}
	for _, v := range []string{"v1", "v2", "v3"} {
		builds[v] = buildAgentVersion(t, v)
	}
	v3Digest, err := fileSHA256(builds["v3"])
	require.NoError(t, err)

	c := startSigningController(t)
	rootDir := filepath.Join(t.TempDir(), "root")
	root := lastLine(c.ok("keys", "init", "--out", rootDir))
	c.ok("keys", "delegate", "--root-key", filepath.Join(rootDir, "root.key"))
	secret, err := credential.LoadOrCreateFleetSecret(c.dataDir)
	require.NoError(t, err)

	nodes := []string{"gw-0", "gw-1", "gw-2"}
	agents := map[string]*supervised{}
	var v3Starts sync.Map // node -> number of starts of v3
	for _, node := range nodes {
		link := newLinkCutter(t, strings.TrimPrefix(c.mqttURL, "tcp://"))
		dir := t.TempDir()
		bin := filepath.Join(dir, "lib", "edgeset-agent")
		require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o700))
		copyExecutable(t, builds["v1"], bin)
		args := []string{"--node-name", node, "--broker-url", link.url(), "--token", credential.NodeToken(secret, node),
			"--trust-root", root, "--image-url", c.server, "--data-dir", filepath.Join(dir, "data"), "--runtime", "fake",
			"--keepalive", "5s", "--disk-min-free", "0", "--disk-min-free-percent", "0", "--memory-min-available", "0",
			"--pid-max-percent", "0", "--log-level", "debug"}
		agents[node] = supervise(t, node, bin, args, func(digest string) {
			// Whoever starts v3 finds its site's link down until it
			// returns to another binary.
			isV3 := digest == v3Digest
			if isV3 {
				n, _ := v3Starts.LoadOrStore(node, new(int))
				*n.(*int)++
			}
			link.setDown(isV3)
		})
	}
	for _, node := range nodes {
		checkfor.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
			if v := agentColumn(t, c, node); v != "v1" {
				return fmt.Errorf("%s: agent %q, want v1", node, v)
			}
			return nil
		})
	}

	// v1 -> v2: the baseline first, then one node at a time.
	out := c.ok("agent", "upgrade", "--file", builds["v2"], "--max-unavailable", "1", "--trial-deadline", "1m",
		"--wait", "--timeout", "3m", "--interval", "200ms")
	assert.Contains(t, out, "created with the baseline revision")
	assert.Regexp(t, `pushed edgeset.io/edgeset-agent:v2-linux-amd64-[0-9a-f]{12} \(sha256:[0-9a-f]{64}, `, out)
	assert.Contains(t, out, "daemonset/edgeset-system/edgeset-agent configured: agent v2 for linux/amd64 (revision 2)")
	assert.Contains(t, out, `daemonset "edgeset-system/edgeset-agent" successfully rolled out`)
	for _, node := range nodes {
		checkfor.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			if v := agentColumn(t, c, node); v != "v2" {
				return fmt.Errorf("%s: agent %q, want v2", node, v)
			}
			return nil
		})
		assert.Equal(t, []int{75}, agents[node].exitCodes(), "%s restarted once, into v2, with the restart code", node)
	}
	status := c.ok("agent", "status")
	assert.Contains(t, status, "target: agent v2 for linux/amd64, revision 2")
	assert.Equal(t, 3, strings.Count(status, "agent v2\n"), status)

	// v2 -> v3, which cannot reach the broker: the first node rolls back.
	out = c.ok("agent", "upgrade", "--file", builds["v3"], "--trial-deadline", "6s", "--trial-attempts", "3")
	assert.Contains(t, out, "agent v3 for linux/amd64 (revision 3)")
	code, stdout, stderr := c.run("rollout", "status", "ds", schema.AgentName, "-n", schema.AgentNamespace, "--timeout", "2m", "--interval", "200ms")
	require.Equal(t, exitFailure, code, "stdout: %s\nstderr: %s", stdout, stderr)
	assert.Contains(t, stderr, "rollout failed: paused")
	var tried []string
	v3Starts.Range(func(k, _ any) bool { tried = append(tried, k.(string)); return true })
	require.Len(t, tried, 1, "the rollout paused after the first node failed")
	failed := tried[0]
	status = c.ok("agent", "status")
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+failed+`\s+yes\s+linux/amd64\s+v2\s+\S+\s+Failed\s+agent v3 was rolled back to v2: agent v3 did not connect and receive its desired state within 6s of starting`), status)
	for _, node := range nodes {
		assert.Equal(t, "v2", agentColumn(t, c, node), "%s", node)
	}
	assert.Equal(t, []int{75, 75, 75}, agents[failed].exitCodes(), "into v2, into v3, back to v2")
	events := c.ok("events", "--for", "ds/"+schema.AgentName, "-n", schema.AgentNamespace)
	assert.Regexp(t, `RolloutInstanceFailed\s+daemonset/edgeset-system/edgeset-agent\s+node `+failed+`: Failed: agent v3 was rolled back to v2`, events)
	assert.Regexp(t, `RolloutPaused\s+daemonset/edgeset-system/edgeset-agent\s+1 of 1 updated instances failed`, events)
}

func copyExecutable(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}
