package edgeagent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// container waits for the managed container named name (its template
// name) that satisfies ok.
func (h *harness) container(name string, ok func(edgeagent.ContainerState) error) edgeagent.ContainerState {
	h.t.Helper()
	var got edgeagent.ContainerState
	checkfor.Eventually(h.t, 5*time.Second, 5*time.Millisecond, func() error {
		for _, c := range h.managed() {
			if c.Labels[edgeagent.LabelContainer] == name {
				got = c
				return ok(c)
			}
		}
		return fmt.Errorf("no container %s", name)
	})
	return got
}

func (h *harness) hasContainer(name string) bool {
	for _, c := range h.managed() {
		if c.Labels[edgeagent.LabelContainer] == name {
			return true
		}
	}
	return false
}

func isRunning(c edgeagent.ContainerState) error {
	if !c.Running {
		return fmt.Errorf("container %s not running", c.Name)
	}
	return nil
}

func anyState(edgeagent.ContainerState) error { return nil }

// history returns the recorded actions on containers, as "action name"
// with the template container name.
func (h *harness) history(actions ...string) []string {
	var out []string
	for _, op := range h.rt.History() {
		if slices.Contains(actions, op.Action) {
			// es_<node>_<namespace>_<name>_<container>_<rev8>
			out = append(out, op.Action+" "+strings.Split(op.Name, "_")[4])
		}
	}
	return out
}

func always() *string { s := schema.RestartPolicyAlways; return &s }

func initTemplate(inits ...schema.Container) schema.PodTemplateSpec {
	return testTemplate("nginx:1.27", func(p *schema.PodSpec) {
		p.Containers[0].Name = "app"
		p.InitContainers = inits
	})
}

func TestInitContainersRunInOrderBeforeMain(t *testing.T) {
	rev := testRevision("edge/init", initTemplate(
		schema.Container{Name: "setup", Image: "busybox:1.36"},
		schema.Container{Name: "migrate", Image: "busybox:1.37"},
	))
	h := newHarness(t)
	h.rt.RecordHistory = true
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	setup := h.container("setup", isRunning)
	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitializing))
	assert.Equal(t, `running init container "setup" (1 of 2)`, st.Message)
	h.waitPasses(3)
	assert.False(t, h.hasContainer("migrate"), "the next init container waits for the first to complete")
	assert.False(t, h.hasContainer("app"))

	require.NoError(t, h.rt.Crash(setup.ID, 0))
	migrate := h.container("migrate", isRunning)
	h.waitInstance(rev.DaemonSet, rev.Hash, func(st schema.InstanceStatus) error {
		if st.Message != `running init container "migrate" (2 of 2)` {
			return fmt.Errorf("message %q", st.Message)
		}
		return nil
	})
	assert.False(t, h.hasContainer("app"))

	require.NoError(t, h.rt.Crash(migrate.ID, 0))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.Zero(t, st.Restarts, "completing is not a restart")
	require.Len(t, st.ContainerIDs, 3, "main first, then the completed init containers")
	assert.Equal(t, []string{setup.ID, migrate.ID}, st.ContainerIDs[1:])
	assert.Equal(t, []string{"create setup", "start setup", "create migrate", "start migrate", "create app", "start app"},
		h.history("create", "start"))
	app := h.container("app", isRunning)
	assert.NotEqual(t, setup.IPAddress, app.IPAddress, "an init container before the network owner has a namespace of its own")
}

func TestInitFailureBackOff(t *testing.T) {
	rev := testRevision("edge/init-fails", initTemplate(schema.Container{Name: "setup", Image: "busybox:1.36"}))
	h := runWith(t, rev)
	setup := h.container("setup", isRunning)

	require.NoError(t, h.rt.Crash(setup.ID, 1))
	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitError))
	assert.Equal(t, `init container "setup" exited with code 1`, st.Message)
	assert.EqualValues(t, 1, st.Restarts)
	require.NotNil(t, st.LastExitCode)
	assert.EqualValues(t, 1, *st.LastExitCode)
	h.waitPasses(3)
	c := h.container("setup", anyState)
	assert.False(t, c.Running, "not restarted before the back-off expires")
	assert.False(t, h.hasContainer("app"), "no main container while an init container fails")

	h.clock.Advance(10 * time.Second)
	h.container("setup", isRunning)
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitializing))
	require.NoError(t, h.rt.Crash(setup.ID, 1))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitCrashLoopBackOff))
	assert.Equal(t, `init container "setup" exited with code 1; back-off 20s restarting failed init container "setup"`, st.Message)
	assert.EqualValues(t, 2, st.Restarts)
	ev := assertEvent(t, h, "Crashed")
	assert.Equal(t, `init container "setup" exited with code 1`, ev.Message)

	h.clock.Advance(20 * time.Second)
	h.container("setup", isRunning)
	require.NoError(t, h.rt.Crash(setup.ID, 0))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.EqualValues(t, 2, st.Restarts)
	assert.Equal(t, setup.ID, h.container("setup", anyState).ID, "restarted in place")
}

func TestInitNotRerunOnAdoptionButOnRecreate(t *testing.T) {
	rev := testRevision("edge/init-once", initTemplate(schema.Container{Name: "setup", Image: "busybox:1.36"}))
	h := runWith(t, rev)
	setup := h.container("setup", isRunning)
	require.NoError(t, h.rt.Crash(setup.ID, 0))
	before := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)

	// The agent restarts (or crashed): the completed init container is not
	// run again while the main container lives.
	h.stop()
	stats := h.rt.Stats()
	h.start(h.config())
	after := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	h.waitPasses(3)
	assert.Equal(t, before.ContainerIDs, after.ContainerIDs)
	assert.Equal(t, stats.Creates, h.rt.Stats().Creates)
	assert.Equal(t, stats.Starts, h.rt.Stats().Starts, "adopted: nothing started again")

	// The main container is removed: the instance is recreated, its init
	// container first.
	app := h.container("app", isRunning)
	require.NoError(t, h.rt.Remove(context.Background(), app.ID))
	rerun := h.container("setup", func(c edgeagent.ContainerState) error {
		if c.ID == setup.ID || !c.Running {
			return errors.New("init container not re-run yet")
		}
		return nil
	})
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitializing))
	assert.False(t, h.hasContainer("app"))
	require.NoError(t, h.rt.Crash(rerun.ID, 0))
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)

	// A new revision is a new instance: its init container runs.
	rev2 := testRevision("edge/init-once", initTemplate(schema.Container{Name: "setup", Image: "busybox:1.37"}))
	h.apply(2, rev2)
	h.waitInstance(rev2.DaemonSet, rev2.Hash, phaseIs(schema.PhaseInitializing))
}

func TestSidecarLifecycle(t *testing.T) {
	var proxyStarted atomic.Bool
	proxy := schema.Container{Name: "proxy", Image: "busybox:1.36", RestartPolicy: always(),
		StartupProbe: &schema.Probe{Exec: &schema.ExecAction{Command: []string{"started"}}, PeriodSeconds: 1, TimeoutSeconds: 100, FailureThreshold: 1000}}
	rev := testRevision("edge/sidecar", initTemplate(proxy, schema.Container{Name: "setup", Image: "busybox:1.37"}))
	h := newHarness(t)
	h.rt.RecordHistory = true
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		if proxyStarted.Load() {
			return 0, nil, nil
		}
		return 1, []byte("warming up"), nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	p := h.container("proxy", isRunning)
	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitializing))
	assert.Equal(t, `waiting for sidecar "proxy" to start`, st.Message)
	h.waitPasses(3)
	assert.False(t, h.hasContainer("setup"), "the next init container waits for the sidecar's startup probe")

	proxyStarted.Store(true)
	setup := h.container("setup", isRunning)
	assert.Equal(t, p.IPAddress, setup.IPAddress, "init containers after the first sidecar join its network namespace")
	require.NoError(t, h.rt.Crash(setup.ID, 0))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	app := h.container("app", isRunning)
	assert.Equal(t, p.IPAddress, app.IPAddress, "the first sidecar owns the network namespace")
	assert.Equal(t, []string{app.ID, p.ID, setup.ID}, st.ContainerIDs)

	// The sidecar keeps running beside the main container and is restarted
	// on exit, the containers in its namespace with it.
	require.NoError(t, h.rt.Crash(p.ID, 2))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.Contains(t, st.Message, "exit code 2; back-off 10s restarting failed container proxy")
	h.clock.Advance(10 * time.Second)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.Equal(t, setup.ID, h.container("setup", anyState).ID, "a completed init container is not re-run")
	assert.False(t, h.container("setup", anyState).Running)

	h.sendDesired(2)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := len(h.managed()); n > 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
	stops := h.history("stop")
	require.GreaterOrEqual(t, len(stops), 2)
	assert.Equal(t, []string{"stop app", "stop proxy"}, stops[len(stops)-2:], "main containers stop before sidecars")
}

func TestSidecarsStopInReverseOrder(t *testing.T) {
	rev := testRevision("edge/sidecars", initTemplate(
		schema.Container{Name: "first", Image: "busybox:1.36", RestartPolicy: always()},
		schema.Container{Name: "second", Image: "busybox:1.37", RestartPolicy: always()},
	))
	h := newHarness(t)
	h.rt.RecordHistory = true
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.Equal(t, []string{"start first", "start second", "start app"}, h.history("start"))

	h.sendDesired(2)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := len(h.managed()); n > 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
	assert.Equal(t, []string{"stop app", "stop second", "stop first"}, h.history("stop"))
}

func TestStartupProbeGatesOtherProbesAndRestarts(t *testing.T) {
	var started atomic.Bool
	var mu sync.Mutex
	var livenessRuns int
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].StartupProbe = &schema.Probe{Exec: &schema.ExecAction{Command: []string{"started"}}, PeriodSeconds: 1, TimeoutSeconds: 100, FailureThreshold: 3}
		p.Containers[0].LivenessProbe = &schema.Probe{Exec: &schema.ExecAction{Command: []string{"alive"}}, PeriodSeconds: 1, TimeoutSeconds: 100}
	})
	rev := testRevision("edge/slow-start", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		if cmd[0] == "alive" {
			mu.Lock()
			livenessRuns++
			mu.Unlock()
			return 0, nil, nil
		}
		if started.Load() {
			return 0, nil, nil
		}
		return 1, []byte("loading"), nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 1, st.Restarts, "failureThreshold startup failures restart the container")
	assert.Contains(t, st.Message, "startup probe failed 3 times")
	ev := assertEvent(t, h, "Unhealthy")
	assert.Contains(t, ev.Message, "startup probe failed 3 times")
	mu.Lock()
	assert.Zero(t, livenessRuns, "no liveness probe before the startup probe succeeds")
	mu.Unlock()

	started.Store(true)
	h.clock.Advance(10 * time.Second)
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.EqualValues(t, 1, st.Restarts)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if livenessRuns == 0 {
			return errors.New("liveness probe not running after startup")
		}
		return nil
	})
}

func TestStartupProbeNotReadyUntilStarted(t *testing.T) {
	var started atomic.Bool
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].StartupProbe = &schema.Probe{Exec: &schema.ExecAction{Command: []string{"started"}}, PeriodSeconds: 1, TimeoutSeconds: 100, FailureThreshold: 1000}
	})
	rev := testRevision("edge/gated-start", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		if started.Load() {
			return 0, nil, nil
		}
		return 1, nil, nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseRunning))
	h.waitPasses(5)
	st, _ := h.instance(rev.DaemonSet, rev.Hash)
	assert.False(t, st.Ready, "not ready before the startup probe succeeds")
	started.Store(true)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
}

func TestPostStartHookFailureRestarts(t *testing.T) {
	var hookFails atomic.Bool
	hookFails.Store(true)
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].Lifecycle = &schema.Lifecycle{PostStart: &schema.LifecycleHandler{Exec: &schema.ExecAction{Command: []string{"register"}}}}
	})
	rev := testRevision("edge/poststart", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		if hookFails.Load() {
			return 7, []byte("registry down"), nil
		}
		return 0, nil, nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 1, st.Restarts)
	assert.Contains(t, st.Message, "postStart hook failed")
	ev := assertEvent(t, h, "FailedPostStartHook")
	assert.Contains(t, ev.Message, "registry down")

	hookFails.Store(false)
	h.clock.Advance(10 * time.Second)
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.EqualValues(t, 1, st.Restarts)
}

func TestPostStartHookHoldsReadiness(t *testing.T) {
	release := make(chan struct{})
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].Lifecycle = &schema.Lifecycle{PostStart: &schema.LifecycleHandler{Exec: &schema.ExecAction{Command: []string{"warm"}}}}
	})
	rev := testRevision("edge/slow-hook", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		<-release
		return 0, nil, nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, revB, rev)
	h.waitInstance(revB.DaemonSet, revB.Hash, runningReady) // the loop is not held up
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseRunning))
	h.waitPasses(3)
	st, _ := h.instance(rev.DaemonSet, rev.Hash)
	assert.False(t, st.Ready, "not ready while its postStart hook runs")
	close(release)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
}

func TestPreStopRunsBeforeStop(t *testing.T) {
	var mu sync.Mutex
	var drained []string
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].Lifecycle = &schema.Lifecycle{PreStop: &schema.LifecycleHandler{Exec: &schema.ExecAction{Command: []string{"drain"}}}}
	})
	rev := testRevision("edge/prestop", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		mu.Lock()
		defer mu.Unlock()
		drained = append(drained, c.Labels[edgeagent.LabelContainer]+" "+strings.Join(cmd, " "))
		return 0, nil, nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)

	h.sendDesired(2)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := len(h.managed()); n > 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	// The fake's Exec fails in a stopped container: the hook ran first.
	assert.Equal(t, []string{"main drain"}, drained)
	for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicEvents)) {
		assert.NotContains(t, string(p.payload), "FailedPreStopHook")
	}
}

func TestPreStopBoundedByGracePeriod(t *testing.T) {
	grace := int64(1)
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.TerminationGracePeriodSeconds = &grace
		p.Containers[0].Lifecycle = &schema.Lifecycle{PreStop: &schema.LifecycleHandler{Exec: &schema.ExecAction{Command: []string{"hang"}}}}
	})
	rev := testRevision("edge/prestop-hangs", tmpl)
	h := newHarness(t)
	release := make(chan struct{})
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		<-release // only the grace period ends the hook
		return 0, nil, nil
	}
	h.start(h.config())
	t.Cleanup(func() { close(release) })
	h.connect()
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	h.sendDesired(2)
	ev := assertEvent(t, h, "FailedPreStopHook")
	assert.Contains(t, ev.Message, "preStop hook failed")
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := len(h.managed()); n > 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
}

func TestTerminationMessages(t *testing.T) {
	fallback := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].TerminationMessagePolicy = schema.TerminationMessageFallbackToLogsOnError
	})
	cases := []struct {
		name     string
		tmpl     schema.PodTemplateSpec
		file     string // termination-log content; "" writes none
		log      string
		exit     int
		oom      bool
		want     string // instance message prefix
		wantCode int32
		reason   string
	}{
		{name: "exit code only", tmpl: testTemplate("busybox:1.36"), exit: 3, want: "exit code 3; back-off 10s", wantCode: 3, reason: "Crashed"},
		{name: "termination log", tmpl: testTemplate("busybox:1.36"), file: "listen tcp :80: address in use\n", log: "ignored\n", exit: 1,
			want: "exit code 1: listen tcp :80: address in use; back-off 10s", wantCode: 1, reason: "Crashed"},
		{name: "file policy ignores the log", tmpl: testTemplate("busybox:1.36"), log: "fatal: boom\n", exit: 1, want: "exit code 1; back-off", wantCode: 1, reason: "Crashed"},
		{name: "fallback to the log on error", tmpl: fallback, log: "starting\nfatal: boom\n", exit: 2,
			want: "exit code 2: starting\nfatal: boom; back-off 10s", wantCode: 2, reason: "Crashed"},
		{name: "file wins over the log", tmpl: fallback, file: "bad config", log: "fatal: boom\n", exit: 2, want: "exit code 2: bad config;", wantCode: 2, reason: "Crashed"},
		{name: "OOMKilled", tmpl: testTemplate("busybox:1.36"), oom: true, want: "OOMKilled: exit code 137; back-off 10s", wantCode: 137, reason: "OOMKilled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev := testRevision("edge/term", tc.tmpl)
			h := newHarness(t)
			h.rt.LogOutput = func(c edgeagent.ContainerState, opts edgeagent.LogOptions) (io.ReadCloser, error) {
				return io.NopCloser(strings.NewReader(tc.log)), nil
			}
			h.start(h.config())
			h.connect()
			h.apply(1, rev)
			st := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
			c := h.container("main", isRunning)
			path := edgeagent.TerminationLogPath(h.dir, c.Labels[edgeagent.LabelPodUID], "main")
			if tc.file != "" {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o644))
			}
			if tc.oom {
				require.NoError(t, h.rt.OOMKill(st.ContainerIDs[0]))
			} else {
				require.NoError(t, h.rt.Crash(st.ContainerIDs[0], tc.exit))
			}
			st = h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
			assert.True(t, strings.HasPrefix(st.Message, tc.want), "message %q, want prefix %q", st.Message, tc.want)
			require.NotNil(t, st.LastExitCode)
			assert.Equal(t, tc.wantCode, *st.LastExitCode)
			ev := assertEvent(t, h, tc.reason)
			if tc.file != "" {
				assert.Contains(t, ev.Message, strings.TrimSpace(tc.file))
				h.clock.Advance(10 * time.Second)
				h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Empty(t, b, "a restart starts with an empty termination log")
			}
		})
	}
}

func TestInitAndMainImagesPulledWithDeviceCredentials(t *testing.T) {
	rev := testRevision("edge/pulls", initTemplate(schema.Container{Name: "setup", Image: "registry.local/setup:1"}))
	h := newHarness(t)
	var mu sync.Mutex
	pulls := map[string]*edgeagent.RegistryAuth{}
	h.rt.OnPull = func(image string, auth *edgeagent.RegistryAuth) {
		mu.Lock()
		defer mu.Unlock()
		pulls[image] = auth
	}
	cfg := h.config()
	cfg.RegistryAuth = &edgeagent.RegistryAuth{Username: "device", Password: "pw", Server: "registry.local"}
	h.start(cfg)
	h.connect()
	h.apply(1, rev)
	setup := h.container("setup", isRunning)
	require.NoError(t, h.rt.Crash(setup.ID, 0))
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, pulls, "registry.local/setup:1", "init container images are pulled")
	require.Contains(t, pulls, "nginx:1.27")
	assert.Equal(t, cfg.RegistryAuth, pulls["registry.local/setup:1"])
	assert.Equal(t, cfg.RegistryAuth, pulls["nginx:1.27"])
}

func TestNetworkOwnerGoneRecreatesInstance(t *testing.T) {
	rev := testRevision("edge/owner-gone", initTemplate(
		schema.Container{Name: "setup", Image: "busybox:1.37"},
		schema.Container{Name: "proxy", Image: "busybox:1.36", RestartPolicy: always()},
	))
	h := runWith(t, rev)
	setup := h.container("setup", isRunning)
	require.NoError(t, h.rt.Crash(setup.ID, 0))
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	proxy := h.container("proxy", isRunning)
	app := h.container("app", isRunning)

	require.NoError(t, h.rt.Remove(context.Background(), proxy.ID))
	rerun := h.container("setup", func(c edgeagent.ContainerState) error {
		if c.ID == setup.ID || !c.Running {
			return errors.New("init container not re-run yet")
		}
		return nil
	})
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitializing))
	_, err := h.rt.Inspect(context.Background(), app.ID)
	assert.ErrorIs(t, err, edgeagent.ErrNotFound, "the containers in the lost namespace are removed")
	require.NoError(t, h.rt.Crash(rerun.ID, 0))
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.Equal(t, h.container("proxy", isRunning).IPAddress, h.container("app", isRunning).IPAddress)
}

func TestSidecarFailureDuringInit(t *testing.T) {
	rev := testRevision("edge/sidecar-fails", initTemplate(
		schema.Container{Name: "proxy", Image: "busybox:1.36", RestartPolicy: always(),
			StartupProbe: &schema.Probe{Exec: &schema.ExecAction{Command: []string{"never"}}, PeriodSeconds: 1000}},
		schema.Container{Name: "setup", Image: "busybox:1.37"},
	))
	h := newHarness(t)
	h.rt.ExecResult = func(edgeagent.ContainerState, []string) (int, []byte, error) { return 1, nil, nil }
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	proxy := h.container("proxy", isRunning)
	require.NoError(t, h.rt.Crash(proxy.ID, 3))
	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitError))
	assert.Equal(t, "exit code 3; back-off 10s restarting failed container proxy", st.Message)
	assert.False(t, h.hasContainer("setup"))
}

func TestAgentRestartDuringInitContinues(t *testing.T) {
	rev := testRevision("edge/init-adopt", initTemplate(
		schema.Container{Name: "setup", Image: "busybox:1.36"},
		schema.Container{Name: "migrate", Image: "busybox:1.37"},
	))
	h := runWith(t, rev)
	setup := h.container("setup", isRunning)
	require.NoError(t, h.rt.Crash(setup.ID, 0))
	migrate := h.container("migrate", isRunning)
	h.stop()

	creates := h.rt.Stats().Creates
	h.start(h.config())
	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseInitializing))
	assert.Equal(t, `running init container "migrate" (2 of 2)`, st.Message, "the running init container is adopted")
	assert.Equal(t, creates, h.rt.Stats().Creates)
	require.NoError(t, h.rt.Crash(migrate.ID, 0))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.Zero(t, st.Restarts)
	assert.Equal(t, setup.ID, h.container("setup", anyState).ID, "the completed init container is not re-run")
}

// TestFallbackMessageIsTheEndedRunsLog: Docker keeps one log for every run
// of a container restarted in place; a FallbackToLogsOnError message is
// the tail of the run that ended, as the kubelet's (which reads that
// container's own log), not lines of earlier runs.
func TestFallbackMessageIsTheEndedRunsLog(t *testing.T) {
	rev := testRevision("edge/term", testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].TerminationMessagePolicy = schema.TerminationMessageFallbackToLogsOnError
	}))
	h := newHarness(t)
	h.rt.LogOutput = func(c edgeagent.ContainerState, opts edgeagent.LogOptions) (io.ReadCloser, error) {
		// An earlier run logged a minute before this run started; this run
		// logs its reason at once, just before the engine's StartedAt.
		lines := []struct {
			at   time.Time
			text string
		}{
			{c.StartedAt.Add(-time.Minute), "fatal: an earlier run\n"},
			{c.StartedAt.Add(-time.Millisecond), "fatal: boom\n"},
		}
		var b strings.Builder
		for _, l := range lines {
			if opts.Since.IsZero() || !l.at.Before(opts.Since) {
				b.WriteString(l.text)
			}
		}
		return io.NopCloser(strings.NewReader(b.String())), nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	st := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 2))
	st = h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.True(t, strings.HasPrefix(st.Message, "exit code 2: fatal: boom; back-off"), "message %q", st.Message)
}
