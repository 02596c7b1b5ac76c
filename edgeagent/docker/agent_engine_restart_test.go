package docker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// Timeouts of the private engine: a dockerd starting (and restoring its
// containers) on a loaded machine, and one shutting down, which stops its
// containers with their grace period first.
const (
	engineStartWait = 60 * time.Second
	engineStopWait  = 60 * time.Second
	strayWait       = 20 * time.Second
)

// TestAgentSurvivesEngineRestart restarts a Docker engine for real under a
// running agent. The engine is a dockerd of the test's own (the machine's
// engine is shared with parallel tests), restarted twice:
//
//   - gracefully (SIGTERM): the daemon stops its containers (live-restore is
//     off, as by default), answering calls meanwhile with server errors such
//     as a failed start, then closes its API and exits;
//   - after a crash (SIGKILL of dockerd alone): containerd, which dockerd
//     starts with a parent-death signal, dies with it, while the container
//     shims and containers outlive it, as they do when a device's dockerd
//     crashes; the restarted daemon finds them and, without live-restore,
//     stops them.
//
// While the engine is going or gone the agent keeps running its passes,
// does not stop and never reports an instance Failed. Once it is back the
// agent restarts the same containers in place (no create, no remove), both
// instances are Running and ready again, the engine holds exactly one
// managed container per daemonset, and runtime events arrive on a stream
// subscribed after the restart.
func TestAgentSurvivesEngineRestart(t *testing.T) {
	t.Parallel()
	eng := startPrivateEngine(t)
	h := newAgentHarnessOn(t, eng.env(t))
	events := &eventRecorder{countingRuntime: h.rt}

	a := revision("edge/a", 1, appTemplate(h.e.image, []string{"sleep"}))
	b := revision("edge/b", 1, appTemplate(h.e.image, []string{"serve", "8080"}, execReadiness))
	h.startOn(events, h.config())
	h.connect()
	h.apply(1, a, b)
	for _, rev := range []schema.Revision{a, b} {
		h.waitInstance(rev, runningReady)
	}
	h.waitManaged(onlyRevisions(a, b))
	require.EqualValues(t, 2, h.rt.creates.Load())

	restartUnderAgent(h, eng, events, syscall.SIGTERM, a, b)
	restartUnderAgent(h, eng, events, syscall.SIGKILL, a, b)

	for _, rev := range []schema.Revision{a, b} {
		for _, s := range h.publishedStatuses(rev) {
			assert.NotEqual(t, schema.PhaseFailed, s.Phase, "%s reported failed: %s", rev.DaemonSet, s.Message)
		}
	}
}

// restartUnderAgent stops the private engine with sig, checks that the agent
// keeps going without it, starts the engine again and checks that the agent
// restores every instance of revs in place, seeing events again. revs[0]'s
// container is killed to check the events.
func restartUnderAgent(h *agentHarness, eng *privateEngine, events *eventRecorder, sig syscall.Signal, revs ...schema.Revision) {
	t := h.t
	t.Helper()
	before := map[string]schema.InstanceStatus{}
	startedAt := map[string]string{} // container id: engine's StartedAt
	for _, rev := range revs {
		st := h.waitInstance(rev, runningReady)
		before[rev.DaemonSet] = st
		for _, id := range st.ContainerIDs {
			startedAt[id] = inspectOrNil(t, eng.cli, id).State.StartedAt
		}
	}
	subsAtStop := events.subscriptions()

	eng.stop(sig)
	h.waitPasses(3) // each fails to list the engine's containers
	select {
	case err := <-h.done:
		t.Fatalf("agent stopped while the engine was down (%s): %v", sig, err)
	default:
	}
	obs, ok := h.agent.Observed()
	require.True(t, ok)
	assert.Len(t, obs.Instances, len(revs), "last known state kept while the engine is down (%s)", sig)
	eng.start()

	for _, rev := range revs {
		st := h.waitInstance(rev, restartedReady(before[rev.DaemonSet].Restarts+1))
		assert.Equal(t, before[rev.DaemonSet].ContainerIDs, st.ContainerIDs,
			"%s: container of %s restarted in place, not replaced", sig, rev.DaemonSet)
	}
	for _, c := range h.waitManaged(onlyRevisions(revs...)) {
		st := inspectOrNil(t, eng.cli, c.ID).State
		assert.True(t, st.Running, "%s: container %s running", sig, c.Names)
		assert.NotEqual(t, startedAt[c.ID], st.StartedAt, "%s: container %s started again", sig, c.Names)
	}
	assert.EqualValues(t, len(revs), h.rt.creates.Load(), "%s: no container created after the first ones", sig)
	assert.Zero(t, h.rt.removes.Load(), "%s: no container removed", sig)

	// Every stream open before the stop ended with the engine: a die event
	// now comes on a subscription opened after it.
	awaitLiveEvents(h, events, subsAtStop)
	killed := h.waitInstance(revs[0], runningReady)
	id := killed.ContainerIDs[0]
	_, err := eng.cli.ContainerKill(t.Context(), id, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		if !events.delivered(id, "die", subsAtStop) {
			return fmt.Errorf("%s: die of %s not delivered on a subscription after the stop (%d subscriptions, %d at stop)",
				sig, id[:12], events.subscriptions(), subsAtStop)
		}
		return nil
	})
	st := h.waitInstance(revs[0], restartedReady(killed.Restarts+1))
	assert.Equal(t, killed.ContainerIDs, st.ContainerIDs, "%s: killed container restarted, not replaced", sig)
	h.waitManaged(onlyRevisions(revs...))
	assert.EqualValues(t, len(revs), h.rt.creates.Load(), "%s: no container created after the first ones", sig)
}

// awaitLiveEvents waits until the agent's event stream delivers events on a
// subscription numbered above after. An event the engine emits while the
// agent is between subscriptions (backing off after a failed one) reaches no
// subscription, so a test expecting an event waits for this first: it
// creates and removes managed containers of another node, which the agent
// ignores, until the removal of one is delivered.
func awaitLiveEvents(h *agentHarness, events *eventRecorder, after int) {
	t := h.t
	t.Helper()
	other := h.e.node + "-events"
	var ids []string
	checkfor.Eventually(t, agentWait, 100*time.Millisecond, func() error {
		for _, id := range ids {
			if events.delivered(id, "destroy", after) {
				return nil
			}
		}
		res, err := h.e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Config: &container.Config{
			Image:  h.e.image,
			Labels: map[string]string{edgeagent.LabelManaged: "true", edgeagent.LabelNode: other, testimage.LabelTest: h.e.node},
		}})
		if err != nil {
			return err
		}
		ids = append(ids, res.ID)
		if _, err := h.e.cli.ContainerRemove(t.Context(), res.ID, client.ContainerRemoveOptions{}); err != nil {
			return err
		}
		return fmt.Errorf("no event delivered on a subscription after number %d (%d subscriptions)", after, events.subscriptions())
	})
}

// TestEngineFailuresAreUnavailable checks the mapping the agent relies on
// across an engine restart, on an engine played by an HTTP server: the
// engine's own failures (no connection, a server error such as a daemon
// shutting down answers) are edgeagent.ErrUnavailable, its refusals of a
// request are not.
func TestEngineFailuresAreUnavailable(t *testing.T) {
	t.Parallel()
	engine := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		reply := func(code int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"message":%q}`, msg)
		}
		name := r.URL.Query().Get("name") // of a create
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			fmt.Fprint(w, "OK")
		case strings.Contains(r.URL.Path, "/containers/stopping/"), name == "stopping":
			reply(http.StatusInternalServerError, "failed to update store for object type *libnetwork.endpoint: open : no such file or directory")
		case strings.Contains(r.URL.Path, "/containers/no-cmd/"):
			reply(http.StatusBadRequest, "exec: \"nothing\": executable file not found in $PATH")
		case name == "taken":
			reply(http.StatusConflict, `Conflict. The container name "/taken" is already in use`)
		default:
			reply(http.StatusNotFound, "No such container")
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(engine))
	t.Cleanup(srv.Close)
	rt, err := docker.New(t.Context(), docker.Options{Host: "tcp://" + srv.Listener.Addr().String()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	gone := httptest.NewServer(http.HandlerFunc(engine))
	goneRT, err := docker.New(t.Context(), docker.Options{Host: "tcp://" + gone.Listener.Addr().String()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = goneRT.Close() })
	gone.Close()

	create := func(rt *docker.Runtime, name string) error {
		_, err := rt.Create(t.Context(), edgeagent.ContainerSpec{Name: name, Image: "app"})
		return err
	}
	cases := []struct {
		name        string
		call        func() error
		also        error // another sentinel the error must match, if any
		unavailable bool  // whether the error is edgeagent.ErrUnavailable
	}{
		{"start, server error", func() error { return rt.Start(t.Context(), "stopping") }, nil, true},
		{"create, server error", func() error { return create(rt, "stopping") }, nil, true},
		{"start, engine gone", func() error { return goneRT.Start(t.Context(), "any") }, nil, true},
		{"create, engine gone", func() error { return create(goneRT, "any") }, nil, true},
		{"start refused", func() error { return rt.Start(t.Context(), "no-cmd") }, nil, false},
		{"inspect, no such container", func() error { _, err := rt.Inspect(t.Context(), "absent"); return err }, edgeagent.ErrNotFound, false},
		{"create, name taken", func() error { return create(rt, "taken") }, edgeagent.ErrNameConflict, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			assert.Equal(t, tc.unavailable, errors.Is(err, edgeagent.ErrUnavailable), "ErrUnavailable in %v", err)
			if tc.also != nil {
				assert.ErrorIs(t, err, tc.also)
			}
		})
	}
}

// execReadiness gives the first container a readiness probe the engine
// runs in it: the agent cannot reach the private engine's network.
func execReadiness(p *schema.PodSpec) {
	p.Containers[0].ReadinessProbe = &schema.Probe{
		Exec:          &schema.ExecAction{Command: []string{"/app", "check", "/app"}},
		PeriodSeconds: 1,
	}
}

// privateEngine is a dockerd of the test's own, which the test may stop,
// kill and restart without disturbing the machine's engine. Its socket, data
// root and exec root live in a short temporary directory: a unix socket path
// is limited to 108 bytes, and containerd's sockets live under the exec
// root. It runs in a network namespace of its own, which outlives its
// restarts as a device's does: nothing of the host's network changes (in the
// host's namespace, a dockerd started with --bridge=none even deletes the
// machine engine's docker0, taking it for a stale bridge of its own).
// Cleanup leaves nothing of it behind: no process, no mount, no file.
type privateEngine struct {
	t     *testing.T
	bin   string // dockerd
	dir   string
	sock  string
	netns *netnsThread   // starts dockerd in the engine's network namespace
	log   *os.File       // dockerd's output, across restarts
	cli   *client.Client // a raw client of the engine

	cmd    *exec.Cmd     // the running dockerd; nil when stopped
	exited chan struct{} // closed once cmd has exited
}

// startPrivateEngine starts a private dockerd. Without root or a dockerd
// binary, or if the daemon does not come up, the test is skipped (failed
// with EDGESET_REQUIRE_DOCKER=1).
func startPrivateEngine(t *testing.T) *privateEngine {
	t.Helper()
	if os.Geteuid() != 0 {
		testimage.Unavailable(t, "a private dockerd needs root")
	}
	bin, err := dockerdPath()
	if err != nil {
		testimage.Unavailable(t, "no dockerd for a private engine: "+err.Error())
	}
	dir, err := os.MkdirTemp("", "edgeset-dockerd-")
	require.NoError(t, err)
	e := &privateEngine{t: t, bin: bin, dir: dir, sock: filepath.Join(dir, "d.sock")}
	t.Cleanup(e.cleanup)
	if e.netns, err = newNetnsThread(); err != nil {
		testimage.Unavailable(t, "no network namespace for a private dockerd: "+err.Error())
	}
	// An empty configuration instead of /etc/docker/daemon.json, whose data
	// root or storage driver would conflict with the flags.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o600))
	e.log, err = os.Create(filepath.Join(dir, "dockerd.log"))
	require.NoError(t, err)
	e.cli, err = client.New(client.WithHost("unix://" + e.sock))
	require.NoError(t, err)
	if err := e.launch(); err != nil {
		testimage.Unavailable(t, "private dockerd did not come up: "+err.Error())
	}
	return e
}

// dockerdPath finds dockerd on PATH, else in /usr/sbin (often missing from
// a user's PATH).
func dockerdPath() (string, error) {
	if p, err := exec.LookPath("dockerd"); err == nil {
		return p, nil
	}
	const sbin = "/usr/sbin/dockerd"
	if _, err := os.Stat(sbin); err != nil {
		return "", fmt.Errorf("dockerd neither on PATH nor at %s", sbin)
	}
	return sbin, nil
}

// env is the test environment on the private engine: a Runtime and a raw
// client of it, the test image loaded into it and a node of the test's own.
func (e *privateEngine) env(t *testing.T) env {
	t.Helper()
	rt, err := docker.New(t.Context(), docker.Options{Host: "unix://" + e.sock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	return env{rt: rt, cli: e.cli, image: testimage.Load(t, e.cli), node: testimage.Node(t, e.cli)}
}

// launch starts dockerd and waits until its API answers, which it does once
// it has restored the containers it holds.
func (e *privateEngine) launch() error {
	cmd := exec.Command(e.bin,
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.dir, "x"),
		"--pidfile", filepath.Join(e.dir, "d.pid"),
		"-H", "unix://"+e.sock,
		// No firewall rules: the containers need no NAT.
		"--iptables=false", "--ip6tables=false",
		// Works on any file system, without mounts per layer.
		"--storage-driver=vfs")
	cmd.Stdout, cmd.Stderr = e.log, e.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group cleanup can kill
	if err := e.netns.run(cmd.Start); err != nil {
		return fmt.Errorf("start %s: %w", e.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	e.cmd, e.exited = cmd, exited
	deadline := time.Now().Add(engineStartWait)
	for {
		err := e.ping()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("dockerd exited (%v) before answering on %s; log:\n%s", cmd.ProcessState, e.sock, e.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd not answering on %s after %v: %w; log:\n%s", e.sock, engineStartWait, err, e.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *privateEngine) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

// start starts the stopped engine again on the same data root and socket.
func (e *privateEngine) start() {
	e.t.Helper()
	require.Nil(e.t, e.cmd, "private dockerd already running")
	require.NoError(e.t, e.launch())
}

// stop signals dockerd (SIGTERM: a graceful shutdown; SIGKILL: a crash) and
// waits for it and its containerd to exit.
func (e *privateEngine) stop(sig syscall.Signal) {
	e.t.Helper()
	require.NotNil(e.t, e.cmd, "private dockerd not running")
	containerd, running := e.containerd()
	require.NoError(e.t, e.cmd.Process.Signal(sig))
	select {
	case <-e.exited:
	case <-time.After(engineStopWait):
		e.t.Fatalf("private dockerd still running %v after %s; log:\n%s", engineStopWait, sig, e.logTail())
	}
	e.cmd, e.exited = nil, nil
	if running {
		e.awaitGone(containerd)
	}
}

// process names one process for its whole life: a pid is reused once the
// process is reaped, its start time (in clock ticks since boot) is not.
type process struct {
	pid   int
	start string
}

// containerd returns the containerd the running daemon started, from
// containerd's pid file, and false if there is none.
func (e *privateEngine) containerd() (process, bool) {
	b, err := os.ReadFile(filepath.Join(e.dir, "x", "containerd", "containerd.pid"))
	if err != nil {
		return process{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return process{}, false
	}
	st, ok := procStat(pid)
	if !ok {
		return process{}, false
	}
	return process{pid: pid, start: st.start}, true
}

// awaitGone waits until the stopped daemon's containerd p has exited and
// been reaped. dockerd starts it with a parent-death signal, so it dies with
// a daemon killed (or one that gave up waiting for it), but not at once;
// then it is left to the init process to reap, which systemd does at once
// and the init of a container may take seconds to do. Until then a new
// dockerd finds its pid in containerd's pid file, takes it for a running
// containerd (signal 0 reaches a zombie), and waits for it in vain. The
// process is matched by pid and start time, not by command line, which
// reads empty while a process is exiting.
func (e *privateEngine) awaitGone(p process) {
	e.t.Helper()
	checkfor.Eventually(e.t, strayWait, 50*time.Millisecond, func() error {
		st, ok := procStat(p.pid)
		if !ok || st.start != p.start {
			return nil // reaped; the pid may be another process's now
		}
		return fmt.Errorf("containerd (pid %d, state %c) of the stopped dockerd not gone", p.pid, st.state)
	})
}

// logTail returns the last lines of dockerd's output, without the chatter
// of its gRPC client.
func (e *privateEngine) logTail() string {
	b, err := os.ReadFile(e.log.Name())
	if err != nil {
		return err.Error()
	}
	var lines []string
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "module=grpc") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-40):], "")
}

// cleanup stops dockerd (SIGTERM, then SIGKILL) and its process group,
// kills whatever survived it (containerd, shims, containers: after a failed
// test they may outlive a killed daemon), unmounts what it mounted under
// dir and removes dir.
func (e *privateEngine) cleanup() {
	t := e.t
	ids := e.containerIDs()
	children := strays(e.dir, ids) // containerd and shims, reaped by init
	if e.cmd != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(engineStopWait):
			t.Errorf("private dockerd still running %v after SIGTERM; killing it", engineStopWait)
			_ = e.cmd.Process.Kill()
			<-e.exited
		}
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
	if e.netns != nil {
		e.netns.close()
	}
	if e.cli != nil {
		_ = e.cli.Close()
	}
	if e.log != nil {
		if t.Failed() {
			t.Logf("private dockerd log (end):\n%s", e.logTail())
		}
		_ = e.log.Close()
	}
	ids = e.containerIDs()
	if pids := killStrays(e.dir, ids, children); len(pids) > 0 {
		t.Errorf("processes of the private dockerd still alive after %v: %v", strayWait, pids)
	}
	if left := unmountUnder(e.dir); len(left) > 0 {
		t.Errorf("cannot unmount %v", left)
	}
	removeCgroups(ids)
	if err := os.RemoveAll(e.dir); err != nil {
		t.Errorf("remove private dockerd's directory: %v", err)
	}
}

// netnsThread runs functions on an OS thread of its own in a network
// namespace it creates: the processes they start are in that namespace,
// which lives as long as one of them or the thread does.
type netnsThread struct {
	calls chan func()
}

// newNetnsThread starts the thread and creates its namespace.
func newNetnsThread() (*netnsThread, error) {
	n := &netnsThread{calls: make(chan func())}
	created := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in the wrong namespace for any other
		// goroutine, ends with this one.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			created <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		created <- nil
		for fn := range n.calls {
			fn()
		}
	}()
	if err := <-created; err != nil {
		return nil, err
	}
	return n, nil
}

// run calls fn on the thread and returns its error.
func (n *netnsThread) run(fn func() error) error {
	done := make(chan error, 1)
	n.calls <- func() { done <- fn() }
	return <-done
}

// close ends the thread; the processes it started keep the namespace.
func (n *netnsThread) close() { close(n.calls) }

// containerIDs lists the ids of every container the engine holds, from its
// data root.
func (e *privateEngine) containerIDs() []string {
	entries, _ := os.ReadDir(filepath.Join(e.dir, "data", "containers"))
	ids := make([]string, 0, len(entries))
	for _, ent := range entries {
		ids = append(ids, ent.Name())
	}
	return ids
}

// killStrays SIGKILLs, until none is left or strayWait has passed, every
// process whose command line names dir (containerd and the shims of an
// engine rooted there) or whose cgroup names one of the container ids, and
// returns those still alive. Within the same time it waits for the init
// process, which inherits them, to reap them and the processes in watch, so
// that no zombie is left either.
func killStrays(dir string, ids []string, watch []int) []int {
	deadline := time.Now().Add(strayWait)
	for {
		pids := strays(dir, ids)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		watch = append(watch, pids...)
		if len(pids) == 0 && !slices.ContainsFunc(watch, isZombie) || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// strays lists the live processes (zombies excluded) killStrays looks for.
func strays(dir string, ids []string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if state, ok := procState(pid); !ok || state == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cgroup, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if bytes.Contains(cmdline, []byte(dir)) ||
			slices.ContainsFunc(ids, func(id string) bool { return bytes.Contains(cgroup, []byte(id)) }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func isZombie(pid int) bool {
	state, ok := procState(pid)
	return ok && state == 'Z'
}

// procState returns the state letter of process pid (R, S, Z...), and false
// if there is no such process.
func procState(pid int) (byte, bool) {
	st, ok := procStat(pid)
	return st.state, ok
}

// stat is what the tests read of /proc/PID/stat.
type stat struct {
	state byte   // R, S, D, Z...
	start string // start time, clock ticks after boot
}

// procStat reads process pid's state and start time, and returns false if
// there is no such process.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses;
	// the start time is the 22nd field, the 20th after comm.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return stat{}, false
	}
	return stat{state: fields[0][0], start: fields[19]}, true
}

// unmountUnder lazily unmounts every mount point at or below dir, deepest
// first, and returns those still mounted.
func unmountUnder(dir string) []string {
	var points []string
	for range 10 {
		points = mountPointsUnder(dir)
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
	return points
}

// mountPointsUnder lists the mount points at or below dir, longest first.
// Paths with characters mountinfo escapes (a space, say) are not matched.
func mountPointsUnder(dir string) []string {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var points []string
	for line := range strings.Lines(string(info)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(x, y string) int { return len(y) - len(x) })
	return points
}

// removeCgroups removes the (empty) cgroups of containers killed without
// their runtime's cleanup; it is a no-op for containers stopped cleanly.
func removeCgroups(ids []string) {
	for _, id := range ids {
		for _, pattern := range []string{"/sys/fs/cgroup/*/docker/" + id, "/sys/fs/cgroup/docker/" + id} {
			dirs, _ := filepath.Glob(pattern)
			for _, d := range dirs {
				_ = os.Remove(d)
			}
		}
	}
}
