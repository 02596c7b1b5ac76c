package edgeagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// minStopGrace is what Stop gets at least after a preStop hook used up the
// grace period, as the kubelet's minimum grace period.
const minStopGrace = 2 * time.Second

// hookRun is the postStart hook of one container run.
type hookRun struct {
	startedAt time.Time
	done      bool
	err       error
	cancel    context.CancelFunc
}

// hooks runs postStart hooks in the background, one goroutine per
// container run, so a slow hook holds up its container and not the
// agent's loop. Goroutines are joined by stopAll.
type hooks struct {
	exec func(ctx context.Context, t probeTarget, h schema.LifecycleHandler) error
	poke func()
	wg   sync.WaitGroup

	mu   sync.Mutex         // guards runs
	runs map[string]hookRun // by container id
}

func newHooks(exec func(context.Context, probeTarget, schema.LifecycleHandler) error, poke func()) *hooks {
	return &hooks{exec: exec, poke: poke, runs: map[string]hookRun{}}
}

// postStart runs h for the container run t, replacing the hook of an
// earlier run of the same container; the loop is poked when it ends.
func (hk *hooks) postStart(ctx context.Context, t probeTarget, h schema.LifecycleHandler) {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	if r, ok := hk.runs[t.id]; ok {
		if r.startedAt.Equal(t.startedAt) {
			return
		}
		r.cancel()
	}
	hctx, cancel := context.WithCancel(ctx)
	hk.runs[t.id] = hookRun{startedAt: t.startedAt, cancel: cancel}
	hk.wg.Add(1)
	go func() {
		defer hk.wg.Done()
		err := hk.exec(hctx, t, h)
		hk.finish(t, err)
	}()
}

func (hk *hooks) finish(t probeTarget, err error) {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	r, ok := hk.runs[t.id]
	if !ok || !r.startedAt.Equal(t.startedAt) {
		return
	}
	r.done, r.err = true, err
	hk.runs[t.id] = r
	hk.poke()
}

// result reports whether the postStart hook of the run of id started at
// startedAt has ended, and its error. A run without a known hook (none in
// the template, or started by an earlier agent process) is done.
func (hk *hooks) result(id string, startedAt time.Time) (done bool, err error) {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	r, ok := hk.runs[id]
	if !ok || !r.startedAt.Equal(startedAt) {
		return true, nil
	}
	return r.done, r.err
}

// passed reports whether the run's postStart hook ended successfully (or
// there is none).
func (hk *hooks) passed(id string, startedAt time.Time) bool {
	done, err := hk.result(id, startedAt)
	return done && err == nil
}

// retain cancels and forgets the hooks of containers not in live.
func (hk *hooks) retain(live map[string]bool) {
	hk.mu.Lock()
	defer hk.mu.Unlock()
	for id, r := range hk.runs {
		if !live[id] {
			r.cancel()
			delete(hk.runs, id)
		}
	}
}

// stopAll cancels every hook and waits for them.
func (hk *hooks) stopAll() {
	hk.retain(nil)
	hk.wg.Wait()
}

// runHandler runs one lifecycle handler against the container run t: exec
// must exit 0, httpGet answer 2xx or 3xx, sleep pause. tcpSocket is
// deprecated in Kubernetes and not run (the kubelet only logs it either).
func (p *prober) runHandler(ctx context.Context, t probeTarget, h schema.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		return p.checkExec(ctx, t, h.Exec)
	case h.HTTPGet != nil:
		return p.checkHTTP(ctx, t, h.HTTPGet)
	case h.Sleep != nil:
		_ = sleepCtx(ctx, time.Duration(h.Sleep.Seconds)*p.second)
		return nil
	case h.TCPSocket != nil:
		p.log.Warn("tcpSocket lifecycle hook is deprecated and not run", "container", t.id)
		return nil
	}
	return fmt.Errorf("lifecycle hook has no exec, httpGet or sleep action")
}

// stopContainer stops c with grace: its preStop hook first, when the
// template of its revision is cached and has one, bounded by the grace
// period, then Stop with what remains (at least minStopGrace). g is c's
// instance, for the address a preStop httpGet reaches; nil is allowed.
func (a *Agent) stopContainer(ctx context.Context, g containerGroup, c ContainerState, grace time.Duration) error {
	if h, t, ok := a.preStopOf(g, c); ok && grace > 0 {
		begin := time.Now()
		hctx, cancel := context.WithTimeout(ctx, grace)
		err := a.probes.runHandler(hctx, t, h)
		cancel()
		if err != nil {
			a.event(ctx, schema.EventWarning, "FailedPreStopHook", c.Labels[LabelDaemonSet],
				fmt.Sprintf("container %s: preStop hook failed: %v", c.Labels[LabelContainer], err))
		}
		grace = max(grace-time.Since(begin), minStopGrace)
	}
	return a.rt.Stop(ctx, c.ID, grace)
}

// preStopOf finds c's preStop hook in the cached template of its
// revision, and what it reaches.
func (a *Agent) preStopOf(g containerGroup, c ContainerState) (schema.LifecycleHandler, probeTarget, bool) {
	rev, ok := a.revisions[c.Labels[LabelRevision]]
	sl, okSlot := labelSlot(c.Labels)
	if !ok || !okSlot || !hasSlot(rev.Template.Spec, sl) {
		return schema.LifecycleHandler{}, probeTarget{}, false
	}
	tc := templateContainer(rev.Template.Spec, sl)
	if tc.Lifecycle == nil || tc.Lifecycle.PreStop == nil {
		return schema.LifecycleHandler{}, probeTarget{}, false
	}
	t := probeTarget{id: c.ID, startedAt: c.StartedAt, host: hookHost(rev.Template.Spec, g, sl, c), ports: tc.Ports}
	return *tc.Lifecycle.PreStop, t, true
}
