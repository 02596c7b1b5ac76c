package docker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestAgentSurvivesEngineOutage plays a Docker engine outage (what a device
// sees while dockerd restarts) without restarting the shared engine: the
// agent talks to the engine through a unix-socket proxy the test cuts and
// restores. While the engine is unreachable the agent keeps running and
// changes nothing; a container killed meanwhile is restarted in place once
// the engine is back, and the event stream is subscribed again.
func TestAgentSurvivesEngineOutage(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	proxy := newEngineProxy(t, engineSocket(t))
	rt, err := docker.New(t.Context(), docker.Options{Host: "unix://" + proxy.path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	h.rt = &countingRuntime{Runtime: rt}
	events := &eventRecorder{countingRuntime: h.rt}

	a := revision("edge/a", 1, appTemplate(h.e.image, []string{"sleep"}))
	b := revision("edge/b", 1, appTemplate(h.e.image, []string{"serve", "8080"}))
	h.startOn(events, h.config())
	h.connect()
	h.apply(1, a, b)
	stA := h.waitInstance(a, runningReady)
	stB := h.waitInstance(b, runningReady)
	h.waitManaged(onlyRevisions(a, b))
	require.EqualValues(t, 2, h.rt.creates.Load())

	// Outage: the agent's engine socket goes away for several resync
	// periods, and one container dies meanwhile.
	proxy.cut()
	subsAtCut := events.subscriptions()
	publishedAtCut := len(h.observedHistory())
	_, err = rt.Info(t.Context())
	require.Error(t, err, "engine unreachable through the cut proxy")
	_, err = h.e.cli.ContainerKill(t.Context(), stA.ContainerIDs[0], client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	h.e.waitExit(t, stA.ContainerIDs[0])
	h.waitPasses(4)
	select {
	case err := <-h.done:
		t.Fatalf("agent stopped during the outage: %v", err)
	default:
	}
	assert.EqualValues(t, 2, h.rt.creates.Load(), "nothing created while the engine was unreachable")
	assert.Zero(t, h.rt.removes.Load(), "nothing removed while the engine was unreachable")
	for _, obs := range h.observedHistory()[publishedAtCut:] {
		assert.Len(t, obs.Instances, 2, "observed state published during the outage: %+v", obs)
	}
	obs, ok := h.agent.Observed()
	require.True(t, ok)
	assert.Len(t, obs.Instances, 2, "last known state kept during the outage")

	// The engine is back: the killed container is restarted in place.
	proxy.restore(t)
	st := h.waitInstance(a, restartedReady(1))
	assert.Equal(t, stA.ContainerIDs, st.ContainerIDs, "killed container restarted, not replaced")
	h.waitManaged(onlyRevisions(a, b))

	// A container killed now is seen through a re-subscribed event stream:
	// its die event reaches the agent on a subscription opened after the
	// cut (every stream open before it was closed by the cut).
	awaitLiveEvents(h, events, subsAtCut)
	_, err = h.e.cli.ContainerKill(t.Context(), stB.ContainerIDs[0], client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		if !events.delivered(stB.ContainerIDs[0], "die", subsAtCut) {
			return fmt.Errorf("die of %s not delivered on a subscription after the cut (%d subscriptions, %d at cut)",
				stB.ContainerIDs[0][:12], events.subscriptions(), subsAtCut)
		}
		return nil
	})
	st = h.waitInstance(b, restartedReady(1))
	assert.Equal(t, stB.ContainerIDs, st.ContainerIDs, "killed container restarted, not replaced")

	list := h.waitManaged(onlyRevisions(a, b))
	for _, c := range list {
		assert.Equal(t, "running", string(c.State), "container %s", c.Names)
	}
	assert.EqualValues(t, 2, h.rt.creates.Load(), "no container created after the initial two")
	assert.Zero(t, h.rt.removes.Load(), "no container removed")
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		hist := h.observedHistory()
		last := hist[len(hist)-1]
		if len(last.Instances) != 2 {
			return fmt.Errorf("last observed state has %d instances", len(last.Instances))
		}
		for _, in := range last.Instances {
			if err := runningReady(in); err != nil {
				return fmt.Errorf("%s: %w", in.DaemonSet, err)
			}
		}
		return nil
	})
	for _, rev := range []schema.Revision{a, b} {
		for _, s := range h.publishedStatuses(rev) {
			assert.NotEqual(t, schema.PhaseFailed, s.Phase, "%s reported failed: %s", rev.DaemonSet, s.Message)
		}
	}
}

// restartedReady accepts a Running and ready instance restarted at least n
// times.
func restartedReady(n int32) func(schema.InstanceStatus) error {
	return func(st schema.InstanceStatus) error {
		if st.Restarts < n {
			return fmt.Errorf("%d restarts (%s %s), want %d", st.Restarts, st.Phase, st.Message, n)
		}
		return runningReady(st)
	}
}

// startOn runs a new agent on h's data dir over rt (h.rt, wrapped); stop
// (or cleanup) ends it.
func (h *agentHarness) startOn(rt edgeagent.Runtime, cfg edgeagent.Config) {
	h.t.Helper()
	a, err := edgeagent.New(cfg, rt, h.conn)
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.done = a, cancel, make(chan error, 1)
	go func() { h.done <- a.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

// engineSocket is the path of the engine's unix socket: DOCKER_HOST's, else
// the default. The test is skipped for an engine reached over TCP.
func engineSocket(t *testing.T) string {
	t.Helper()
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		return "/var/run/docker.sock"
	}
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		t.Skipf("DOCKER_HOST %s is not a unix socket", host)
	}
	return path
}

// eventRecorder is the runtime recording every event it hands the agent,
// with the number (from 1) of the Events subscription that carried it.
type eventRecorder struct {
	*countingRuntime
	mu   sync.Mutex // guards subs, seen
	subs int
	seen []recordedEvent
}

type recordedEvent struct {
	sub int
	ev  edgeagent.RuntimeEvent
}

func (r *eventRecorder) Events(ctx context.Context) (<-chan edgeagent.RuntimeEvent, <-chan error) {
	r.mu.Lock()
	r.subs++
	sub := r.subs
	r.mu.Unlock()
	in, errs := r.countingRuntime.Events(ctx)
	out := make(chan edgeagent.RuntimeEvent)
	go func() {
		defer close(out)
		for ev := range in {
			r.mu.Lock()
			r.seen = append(r.seen, recordedEvent{sub: sub, ev: ev})
			r.mu.Unlock()
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errs
}

func (r *eventRecorder) subscriptions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subs
}

// delivered reports whether an event with action for container id came on
// a subscription numbered above after.
func (r *eventRecorder) delivered(id, action string, after int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.seen {
		if e.sub > after && e.ev.ContainerID == id && e.ev.Action == action {
			return true
		}
	}
	return false
}

// engineProxy forwards connections on a unix socket of its own to the
// engine's socket. cut closes the listener (removing the socket file) and
// every forwarded connection, so the engine looks gone; restore listens on
// the same path again.
type engineProxy struct {
	path     string
	upstream string
	wg       sync.WaitGroup // serve and forwarding goroutines

	mu    sync.Mutex // guards ln, conns
	ln    net.Listener
	conns map[net.Conn]bool // both ends of every forwarded connection
}

// newEngineProxy starts a proxy to upstream in a temporary directory; it is
// cut and its goroutines joined at cleanup.
func newEngineProxy(t *testing.T, upstream string) *engineProxy {
	t.Helper()
	p := &engineProxy{path: filepath.Join(t.TempDir(), "engine.sock"), upstream: upstream, conns: map[net.Conn]bool{}}
	p.restore(t)
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

// restore listens on the proxy's path; it is a no-op while listening.
func (p *engineProxy) restore(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("unix", p.path)
	require.NoError(t, err)
	p.ln = ln
	p.wg.Add(1)
	go p.serve(ln)
}

// cut closes the listener and every forwarded connection; it is safe to
// call twice.
func (p *engineProxy) cut() {
	p.mu.Lock()
	ln, conns := p.ln, p.conns
	p.ln, p.conns = nil, map[net.Conn]bool{}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for c := range conns {
		_ = c.Close()
	}
}

func (p *engineProxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(ln, c)
	}
}

// forward copies c to a new engine connection and back until either side
// closes, then closes both.
func (p *engineProxy) forward(ln net.Listener, c net.Conn) {
	defer p.wg.Done()
	if !p.track(ln, c) {
		_ = c.Close()
		return
	}
	up, err := net.Dial("unix", p.upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(ln, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	p.untrack(c, up)
}

// track registers a connection accepted or dialled for ln; it reports false
// once ln has been cut.
func (p *engineProxy) track(ln net.Listener, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *engineProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}
