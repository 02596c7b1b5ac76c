package natstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// BuildServer builds nats-server, at the version the project's go.mod
// requires, into dir and returns its path: no registry and no Debian
// package is needed (Debian's 2.9 is too old for edgeset).
func BuildServer(dir string) (string, error) {
	bin := filepath.Join(dir, "nats-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build nats-server: %v\n%s", err, out)
	}
	return bin, nil
}

// binary is what Binary built, once per test binary.
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "edgeset-nats-")
	if err != nil {
		return "", fmt.Errorf("directory for nats-server: %w", err)
	}
	binaryDir.Store(&dir)
	return BuildServer(dir)
})

// binaryDir is the directory Binary built into, nil until it did.
var binaryDir atomic.Pointer[string]

// Binary builds nats-server with BuildServer, once per test binary, into
// a temporary directory that RemoveBinary removes, and returns its path.
// The Go build cache keeps the compiled packages between test binaries.
func Binary() (string, error) { return binary() }

// RemoveBinary removes what Binary built, if it was called: a package
// whose tests call Binary (or StartCluster) calls it from TestMain once
// m.Run returned.
func RemoveBinary() {
	if dir := binaryDir.Load(); dir != nil {
		_ = os.RemoveAll(*dir)
	}
}

// StartCluster starts n nats-server processes of Binary as one cluster,
// as StartProcs does.
func StartCluster(t testing.TB, n int) *Procs {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("nats-server for the cluster: %v", err)
	}
	return StartProcs(t, bin, n)
}

// Procs is a cluster of nats-server processes configured as Config
// describes, each on fixed ports and its own store so that it can be
// killed with SIGKILL and started again as the same member.
type Procs struct {
	Procs []*Proc
	// Clients are the members' NATS client URLs (nats://).
	Clients []string
	// Issuer is the auth callout issuer's account key pair; AuthPassword
	// the callout user's password (AuthUser).
	Issuer       nkeys.KeyPair
	AuthPassword string
}

// Proc is one member of Procs.
type Proc struct {
	t       testing.TB
	bin     string
	conf    string
	logPath string // the server's standard error, kept across restarts
	name    string // server_name
	monitor int
	mqtt    int
	prof    int // 0: no profiles served
	// Stderr, when set before Start, receives the server's log too.
	Stderr *os.File

	mu  sync.Mutex // guards cmd and log
	cmd *exec.Cmd
	log *os.File // the open logPath while cmd runs
}

// healthyTimeout bounds a member's wait for JetStream to be current.
const healthyTimeout = 2 * time.Minute

// StartProcs starts n nats-server processes of bin as one cluster, kills
// them when the test ends, and waits until every member reports
// JetStream healthy. The processes inherit the test's file limit. Each
// member's log goes to a file in its directory (Proc.Log), and to the
// test's standard error too with EDGESET_NATS_LOG=1. With
// EDGESET_NATS_PROF=1 each serves its Go profiles (ProfURL).
func StartProcs(t testing.TB, bin string, n int) *Procs {
	t.Helper()
	issuer, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatalf("create issuer key: %v", err)
	}
	pub, _ := issuer.PublicKey()
	ports := FreePorts(t, 5*n) // route, client, MQTT, monitor, profiles per member
	routes := ports[:n]
	c := &Procs{Issuer: issuer, AuthPassword: "auth-" + randomSuffix(t)}
	for i := range n {
		dir := t.TempDir()
		sc := ServerConfig{Name: fmt.Sprintf("s%d", i), StoreDir: filepath.Join(dir, "jetstream"),
			ClientPort: ports[n+i], MQTTPort: ports[2*n+i], MonitorPort: ports[3*n+i],
			RoutePort: routes[i], RoutePorts: routes, Issuer: pub, AuthPassword: c.AuthPassword}
		if os.Getenv("EDGESET_NATS_PROF") != "" {
			sc.ProfPort = ports[4*n+i]
		}
		conf := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(conf, []byte(Config(sc)), 0o600); err != nil {
			t.Fatalf("write %s: %v", conf, err)
		}
		p := &Proc{t: t, bin: bin, conf: conf, logPath: filepath.Join(dir, "nats.log"), name: sc.Name,
			monitor: sc.MonitorPort, mqtt: sc.MQTTPort, prof: sc.ProfPort}
		if os.Getenv("EDGESET_NATS_LOG") != "" {
			p.Stderr = os.Stderr
		}
		p.Start()
		t.Cleanup(p.Kill)
		c.Procs = append(c.Procs, p)
		c.Clients = append(c.Clients, fmt.Sprintf("nats://127.0.0.1:%d", sc.ClientPort))
	}
	for _, p := range c.Procs {
		p.WaitHealthy()
	}
	return c
}

// MQTTURLs are the members' MQTT listeners, as tcp://host:port.
func (c *Procs) MQTTURLs() []string {
	urls := make([]string, len(c.Procs))
	for i, p := range c.Procs {
		urls[i] = fmt.Sprintf("tcp://127.0.0.1:%d", p.mqtt)
	}
	return urls
}

// Start starts the member's process (again, after Kill). Its standard
// error, the server's log, is appended to the member's log file (Log).
func (p *Proc) Start() {
	p.t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatalf("nats-server %s: log file: %v", p.conf, err)
	}
	cmd := exec.Command(p.bin, "-c", p.conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = log
	if p.Stderr != nil {
		cmd.Stderr = io.MultiWriter(log, p.Stderr)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		p.t.Fatalf("start nats-server %s: %v", p.conf, err)
	}
	p.mu.Lock()
	p.cmd, p.log = cmd, log
	p.mu.Unlock()
}

// Kill sends SIGKILL and reaps the process; safe to call twice.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	_ = p.log.Close()
	p.cmd, p.log = nil, nil
}

// Name is the member's server_name (s0, s1, ...), as its peers and its
// monitoring endpoints name it.
func (p *Proc) Name() string { return p.name }

// Log returns what the member logged so far, across its restarts.
func (p *Proc) Log() (string, error) {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return "", fmt.Errorf("log of nats-server %s: %w", p.name, err)
	}
	return string(data), nil
}

// Log lines of a configuration reload (nats-server's reload.go and
// signal.go).
const (
	logReloaded     = "Reloaded server configuration"
	logReloadFailed = "Failed to reload server configuration"
)

// reloadTimeout bounds the wait for a reload to be logged.
const reloadTimeout = 30 * time.Second

// Reload makes the member reload its configuration file as an operator
// does, with SIGHUP, and returns once its log reports the reload done; a
// reload the server refused, or one not reported within reloadTimeout,
// fails the test t.
func (p *Proc) Reload(t testing.TB) {
	t.Helper()
	before, err := p.Log()
	if err != nil {
		t.Fatal(err)
	}
	done, failed := strings.Count(before, logReloaded), strings.Count(before, logReloadFailed)
	pid := p.PID()
	if pid == 0 {
		t.Fatalf("reload nats-server %s: not running", p.name)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatalf("reload nats-server %s: SIGHUP: %v", p.name, err)
	}
	checkfor.Eventually(t, reloadTimeout, 10*time.Millisecond, func() error {
		log, err := p.Log()
		if err != nil {
			return err
		}
		if strings.Count(log, logReloadFailed) > failed {
			t.Fatalf("nats-server %s refused the reload:\n%s", p.name, log[len(before):])
		}
		if strings.Count(log, logReloaded) == done {
			return fmt.Errorf("nats-server %s has not logged the reload yet", p.name)
		}
		return nil
	})
}

// PID is the running process's id, 0 when it is not running.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// RSS is the process's resident set size in bytes (VmRSS).
func (p *Proc) RSS() (uint64, error) {
	pid := p.PID()
	if pid == 0 {
		return 0, fmt.Errorf("nats-server %s is not running", p.conf)
	}
	return ProcessRSS(pid)
}

// ProcessRSS reads a process's VmRSS from /proc/PID/status, in bytes.
func ProcessRSS(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			f := bytes.Fields(v) // "123456 kB"
			if len(f) == 2 {
				kb, err := strconv.ParseUint(string(f[0]), 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// WaitHealthy waits until the member's /healthz says its JetStream is
// current with the cluster.
func (p *Proc) WaitHealthy() {
	p.t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", p.monitor)
	checkfor.Eventually(p.t, healthyTimeout, 100*time.Millisecond, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

// Monitor returns a monitoring endpoint of the member (e.g. "/jsz").
func (p *Proc) Monitor(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", p.monitor, path)
}

// ProfURL is where the member serves its Go profiles (/debug/pprof/),
// "" unless EDGESET_NATS_PROF was set when it started.
func (p *Proc) ProfURL() string {
	if p.prof == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", p.prof)
}
