package edgeagent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
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
	checkFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.rt.subscriptions.Load() < 2 {
			return errors.New("event stream not resubscribed")
		}
		return nil
	})
	require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 9))
	st = h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 9, *st.LastExitCode)
}
