package edgeagent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

func TestSharedNetworkOwnerRestartRestartsFollowers(t *testing.T) {
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers = append(p.Containers, schema.Container{Name: "sidecar", Image: "nginx:1.27"})
	})
	rev := testRevision("edge/pair", tmpl)
	h := runWith(t, rev)
	st := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	require.Len(t, st.ContainerIDs, 2)
	owner, follower := st.ContainerIDs[0], st.ContainerIDs[1]
	ctx := context.Background()
	f, err := h.rt.Inspect(ctx, follower)
	require.NoError(t, err)
	o, err := h.rt.Inspect(ctx, owner)
	require.NoError(t, err)
	assert.Equal(t, o.IPAddress, f.IPAddress, "the follower joined the owner's network namespace")
	followerStart := f.StartedAt

	require.NoError(t, h.rt.Crash(owner, 1))
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	h.clock.Advance(10 * time.Second)
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.Equal(t, []string{owner, follower}, st.ContainerIDs)
	assert.EqualValues(t, 1, st.Restarts, "the follower's restart is not a crash")
	f, err = h.rt.Inspect(ctx, follower)
	require.NoError(t, err)
	assert.True(t, f.StartedAt.After(followerStart), "follower restarted into the new namespace")
}

func TestRuntimeEventsDriveReactionAndResubscribe(t *testing.T) {
	h := newHarness(t)
	h.rt.EventBuffer = 1
	cfg := h.config()
	cfg.ResyncInterval = time.Hour // only events wake the loop
	cfg.EventsRetry = edgeagent.Backoff{Initial: time.Millisecond, Max: time.Millisecond}
	h.start(cfg)
	h.connect()
	h.apply(1, revA)
	st := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)

	// Overflow the one-event buffer with foreign containers' events.
	for i := range 20 {
		createStarted(t, h.rt.Runtime, edgeagent.ContainerSpec{Name: fmt.Sprintf("noise-%d", i), Image: "busybox:1.36"})
	}
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.rt.subscriptions.Load() < 2 {
			return errors.New("event stream not resubscribed")
		}
		return nil
	})
	require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 9))
	st = h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 9, *st.LastExitCode)
}

// failingStarts fails the first left calls to Start with err.
type failingStarts struct {
	*countingRuntime
	err  error
	left atomic.Int64
}

func (r *failingStarts) Start(ctx context.Context, id string) error {
	if r.left.Add(-1) >= 0 {
		return fmt.Errorf("start container %s: %w", id, r.err)
	}
	return r.countingRuntime.Start(ctx, id)
}

func TestStartFailure(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		failures  int64
		wantPhase string // of the instance while starts fail
	}{
		// An engine restarting answers with server errors for a moment: the
		// instance waits for it, it has not failed.
		{"engine unavailable", fmt.Errorf("engine shutting down: %w", edgeagent.ErrUnavailable), 3, schema.PhasePending},
		// A start the engine refuses fails the same way again: the kubelet's
		// StartError, under the crash back-off (TestStartErrorBacksOff).
		{"start refused", errors.New("executable file not found"), 1 << 30, schema.PhaseCrashLoopBackOff},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			rt := &failingStarts{countingRuntime: h.rt, err: tc.err}
			rt.left.Store(tc.failures)
			a, err := edgeagent.New(h.config(), rt, h.conn)
			require.NoError(t, err)
			h.agent = a
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			h.connect()
			h.apply(1, revA)

			if tc.wantPhase == schema.PhaseCrashLoopBackOff {
				st := h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
				assert.Contains(t, st.Message, "StartError: ")
				assert.Contains(t, st.Message, tc.err.Error())
				return
			}
			h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
			var sawWaiting bool
			for _, st := range h.publishedStatuses(revA.DaemonSet, revA.Hash) {
				assert.NotEqual(t, schema.PhaseFailed, st.Phase, "reported failed: %s", st.Message)
				sawWaiting = sawWaiting || st.Phase == tc.wantPhase && strings.Contains(st.Message, tc.err.Error())
			}
			assert.True(t, sawWaiting, "%s with the engine's error published while starts failed", tc.wantPhase)
			for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicEvents)) {
				assert.NotContains(t, string(p.payload), `"reason":"Failed"`)
			}
		})
	}
}

// TestRestartCountSurvivesAgentRestart: RESTARTS counts the daemon's
// crashes, not the agent's life; the count (which also names the
// kubelet-style log link) comes back from agent.db after the agent
// restarts, offline, and keeps counting from there.
func TestRestartCountSurvivesAgentRestart(t *testing.T) {
	rev := testRevision("edge/crashy", testTemplate("busybox:1.36"))
	h := runWith(t, rev)
	for want := int32(1); want <= 2; want++ {
		st := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
		require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 1))
		h.waitInstance(rev.DaemonSet, rev.Hash, func(st schema.InstanceStatus) error {
			if st.Restarts != want {
				return fmt.Errorf("restarts %d, want %d", st.Restarts, want)
			}
			return nil
		})
		h.clock.Advance(time.Minute)
	}
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	h.stop()

	h.start(h.config()) // no connection: what it knows is agent.db's
	st := h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.EqualValues(t, 2, st.Restarts, "restored after the agent's restart")
	require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 1))
	h.waitInstance(rev.DaemonSet, rev.Hash, func(st schema.InstanceStatus) error {
		if st.Restarts != 3 {
			return fmt.Errorf("restarts %d, want 3", st.Restarts)
		}
		return nil
	})
}
