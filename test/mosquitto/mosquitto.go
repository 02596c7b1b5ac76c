// Package mosquitto starts a real Mosquitto broker for interoperability
// tests: authenticated, with edgeset's per-node ACL, persistent, on a free
// loopback port, stopped by t.Cleanup.
//
// The binary is taken from $EDGESET_MOSQUITTO, else PATH, else
// /usr/sbin/mosquitto. Without one, Start skips the test, unless CI=true or
// EDGESET_REQUIRE_MOSQUITTO=1, where it fails it.
package mosquitto

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Defaults applied by Start.
const (
	DefaultControllerUser      = "controller"
	DefaultMaxInflightMessages = 100
	DefaultMaxQueuedMessages   = 100000
)

// Password hashing parameters of mosquitto_passwd (Mosquitto 2.0, "$7$"):
// PBKDF2-HMAC-SHA512, 101 iterations, 12-byte salt, 64-byte key.
const (
	hashIterations = 101
	hashSaltLen    = 12
	hashKeyLen     = 64
)

// readyTimeout bounds waiting for the broker to accept TCP connections.
const readyTimeout = 10 * time.Second

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 10 * time.Second

// Config describes the broker to start.
type Config struct {
	// Users maps user name to password. A node's user is named after the
	// node; include the controller user too. Beyond 50 users the password
	// file is written in-process (HashPassword) instead of by
	// mosquitto_passwd.
	Users map[string]string
	// ControllerUser gets readwrite on edgeset/#. Default "controller".
	ControllerUser string
	// MaxInflightMessages and MaxQueuedMessages size Mosquitto's per-client
	// QoS 1 window and queue. Defaults 100 and 100,000 (bursts in tests).
	MaxInflightMessages int
	MaxQueuedMessages   int
}

// Server is a running (or stopped) Mosquitto process. Its methods must be
// called from the test goroutine or t.Cleanup.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cfg  Config // with defaults; changed by Resize

	mu sync.Mutex
	// Guarded by mu.
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Start writes the configuration into t.TempDir(), starts Mosquitto and
// waits until it accepts connections. The broker is stopped on cleanup.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin := locate(t)
	cfg = cfg.withDefaults()
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), cfg: cfg}
	if err := s.writeFiles(cfg); err != nil {
		t.Fatalf("mosquitto: %v", err)
	}
	t.Cleanup(s.Stop)
	s.start()
	return s
}

// URL is the broker's tcp:// URL.
func (s *Server) URL() string { return "tcp://" + s.Addr() }

// Addr is the broker's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir is the directory holding the configuration, persistence and log.
func (s *Server) Dir() string { return s.dir }

// Pid is the process id of the running broker, or 0 when it is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log returns what Mosquitto has logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath())
	return string(b)
}

// Stop terminates the broker (SIGTERM, which saves persistence; SIGKILL
// after a timeout) and waits for it to exit. Stopping a stopped broker does
// nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		s.t.Errorf("mosquitto: did not stop within %s of SIGTERM; killed", stopTimeout)
	}
}

// Resize restarts the broker with new per-client queue sizes (0 keeps the
// current value), keeping its port and persistence.
func (s *Server) Resize(maxInflight, maxQueued int) {
	s.t.Helper()
	if maxInflight > 0 {
		s.cfg.MaxInflightMessages = maxInflight
	}
	if maxQueued > 0 {
		s.cfg.MaxQueuedMessages = maxQueued
	}
	if err := os.WriteFile(s.confPath(), []byte(s.conf(s.cfg)), 0o600); err != nil {
		s.t.Fatalf("mosquitto: rewrite configuration: %v", err)
	}
	s.Restart()
}

// Restart stops the broker and starts it again on the same port with the
// same persistence, so retained messages survive.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// start launches the process and waits until it accepts connections.
func (s *Server) start() {
	s.t.Helper()
	logFile, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatalf("mosquitto: open log: %v", err)
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin, "-c", s.confPath())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("mosquitto: start %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := waitReady(s.Addr(), exited); err != nil {
		s.Stop()
		s.t.Fatalf("mosquitto: %v\nlog:\n%s", err, s.Log())
	}
}

// waitReady polls addr until a TCP connection succeeds, the process exits
// or readyTimeout passes.
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-exited:
			return errors.New("exited during startup")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting connections on %s after %s: %w", addr, readyTimeout, err)
		}
	}
}

func (s *Server) confPath() string   { return filepath.Join(s.dir, "mosquitto.conf") }
func (s *Server) passwdPath() string { return filepath.Join(s.dir, "passwd") }
func (s *Server) aclPath() string    { return filepath.Join(s.dir, "acl") }
func (s *Server) logPath() string    { return filepath.Join(s.dir, "mosquitto.log") }

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.ControllerUser == "" {
		c.ControllerUser = DefaultControllerUser
	}
	if c.MaxInflightMessages <= 0 {
		c.MaxInflightMessages = DefaultMaxInflightMessages
	}
	if c.MaxQueuedMessages <= 0 {
		c.MaxQueuedMessages = DefaultMaxQueuedMessages
	}
	return c
}

// writeFiles writes mosquitto.conf, the password file and the ACL file.
func (s *Server) writeFiles(cfg Config) error {
	if err := writePasswords(s.passwdPath(), cfg.Users); err != nil {
		return err
	}
	if err := os.WriteFile(s.aclPath(), []byte(ACL(cfg.ControllerUser)), 0o600); err != nil {
		return fmt.Errorf("write acl: %w", err)
	}
	return os.WriteFile(s.confPath(), []byte(s.conf(cfg)), 0o600)
}

// conf renders mosquitto.conf.
func (s *Server) conf(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listener %d 127.0.0.1\n", s.port)
	b.WriteString("allow_anonymous false\n")
	fmt.Fprintf(&b, "password_file %s\n", s.passwdPath())
	fmt.Fprintf(&b, "acl_file %s\n", s.aclPath())
	b.WriteString("persistence true\n")
	fmt.Fprintf(&b, "persistence_location %s/\n", s.dir)
	fmt.Fprintf(&b, "max_inflight_messages %d\n", cfg.MaxInflightMessages)
	fmt.Fprintf(&b, "max_queued_messages %d\n", cfg.MaxQueuedMessages)
	b.WriteString("log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n")
	if os.Geteuid() == 0 {
		// As root Mosquitto drops to user "mosquitto", which cannot
		// write the test's temporary directory.
		b.WriteString("user root\n")
	}
	return b.String()
}

// ACL returns edgeset's Mosquitto ACL (acl_file syntax), equivalent to the
// embedded broker's: each node authenticates with a user named after the
// node and may write only its own status, online, observed, events, telemetry,
// logs/response and exec/response topics, read only its own desired,
// logs/request, exec/request, secrets/{hash} and exec/input/{id} topics, and read every revision and ConfigMap; controllerUser may read and write
// everything under edgeset/ (every schema version) and read Mosquitto's
// count of dropped messages. "pattern" lines apply to every user ("topic"
// lines before the first "user" line would apply to anonymous clients only).
func ACL(controllerUser string) string {
	var b strings.Builder
	b.WriteString("# edgeset ACL: a node's MQTT user name is its node name (%u).\n")
	for _, kind := range []string{schema.TopicStatus, schema.TopicOnline, schema.TopicObserved, schema.TopicEvents, schema.TopicTelemetry} {
		fmt.Fprintf(&b, "pattern write %s\n", schema.NodeTopic("%u", kind))
	}
	for _, kind := range []string{schema.TopicLogsResponse, schema.TopicExecResponse} {
		fmt.Fprintf(&b, "pattern write %s\n", schema.NodeTopic("%u", kind))
	}
	for _, kind := range []string{schema.TopicDesired, schema.TopicLogsRequest, schema.TopicExecRequest} {
		fmt.Fprintf(&b, "pattern read %s\n", schema.NodeTopic("%u", kind))
	}
	fmt.Fprintf(&b, "pattern read %s\n", schema.NodeSecretTopic("%u", "+"))
	fmt.Fprintf(&b, "pattern read %s\n", schema.ExecInputTopic("%u", "+"))
	fmt.Fprintf(&b, "pattern read %s\n", schema.RevisionTopic("#"))
	fmt.Fprintf(&b, "pattern read %s\n", schema.ConfigMapTopic("#"))
	fmt.Fprintf(&b, "pattern read %s\n", schema.KeySetTopic)
	b.WriteString("\n# The controller reads every node's topics and writes desired states and revisions.\n")
	fmt.Fprintf(&b, "user %s\ntopic readwrite edgeset/#\n", controllerUser)
	b.WriteString("# ...and the broker's count of dropped messages, to repair what it dropped.\n")
	b.WriteString("topic read $SYS/broker/publish/messages/dropped\n")
	return b.String()
}

// passwdToolMaxUsers is the most users written with mosquitto_passwd, which
// rewrites the whole file for every user (a 3,000-node fleet would take
// minutes); larger files are written with HashPassword, which produces the
// same lines (TestHashPasswordMatchesMosquittoPasswd).
const passwdToolMaxUsers = 50

// writePasswords writes the password file with mosquitto_passwd -b when it
// is installed and there are at most passwdToolMaxUsers users, else with
// HashPassword.
func writePasswords(path string, users map[string]string) error {
	names := slices.Sorted(maps.Keys(users))
	if tool := lookPasswdTool(); tool != "" && len(users) <= passwdToolMaxUsers {
		return runPasswdTool(tool, path, names, users)
	}
	var b strings.Builder
	for _, name := range names {
		line, err := PasswordLine(name, users[name])
		if err != nil {
			return err
		}
		b.WriteString(line + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	return nil
}

// runPasswdTool adds each user with mosquitto_passwd -b.
func runPasswdTool(tool, path string, names []string, users map[string]string) error {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return fmt.Errorf("create password file: %w", err)
	}
	for _, name := range names {
		out, err := exec.Command(tool, "-b", path, name, users[name]).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s -b %s %s: %v: %s", tool, path, name, err, out)
		}
	}
	return nil
}

// lookPasswdTool finds mosquitto_passwd; tests replace it to exercise
// HashPassword.
var lookPasswdTool = func() string {
	p, err := exec.LookPath("mosquitto_passwd")
	if err != nil {
		return ""
	}
	return p
}

// PasswordLine returns a password file line "user:$7$..." for Mosquitto 2.
func PasswordLine(user, password string) (string, error) {
	if user == "" || strings.ContainsAny(user, ":\n") {
		return "", fmt.Errorf("password file user %q: empty or contains ':' or a newline", user)
	}
	salt := make([]byte, hashSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	hash, err := HashPassword(password, salt)
	if err != nil {
		return "", err
	}
	return user + ":" + hash, nil
}

// HashPassword returns password in mosquitto_passwd's "$7$" format:
// $7$<iterations>$<base64 salt>$<base64 PBKDF2-HMAC-SHA512 key>.
func HashPassword(password string, salt []byte) (string, error) {
	key, err := pbkdf2.Key(sha512.New, password, salt, hashIterations, hashKeyLen)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	enc := base64.StdEncoding
	return fmt.Sprintf("$7$%d$%s$%s", hashIterations, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// fallbackBinary is where Debian and Ubuntu install mosquitto (outside a
// normal user's PATH); a variable so tests can simulate its absence.
var fallbackBinary = "/usr/sbin/mosquitto"

// locate finds the mosquitto binary or skips (fails under CI) the test.
func locate(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("EDGESET_MOSQUITTO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("mosquitto: EDGESET_MOSQUITTO=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	if _, err := os.Stat(fallbackBinary); err == nil {
		return fallbackBinary
	}
	const msg = "mosquitto not found (set EDGESET_MOSQUITTO, put it on PATH or install the mosquitto package)"
	if os.Getenv("CI") == "true" || os.Getenv("EDGESET_REQUIRE_MOSQUITTO") == "1" {
		t.Fatal(msg + "; required because CI=true or EDGESET_REQUIRE_MOSQUITTO=1")
	}
	t.Skip(msg)
	return ""
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mosquitto: find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
