package edgeagent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

const lockDS = "edge/flasher"

func lockedTemplate(image string) schema.PodTemplateSpec {
	t := testTemplate(image)
	t.Metadata.Annotations = map[string]string{schema.UpdateLockAnnotation: "true"}
	return t
}

// lockHarness is a harness whose agent polls update locks often, with
// two revisions of a daemonset that opts into the lock.
type lockHarness struct {
	*harness
	v1, v2 schema.Revision
}

func newLockHarness(t *testing.T) *lockHarness {
	h := &lockHarness{harness: newHarness(t), v1: testRevision(lockDS, lockedTemplate("busybox:1.36")),
		v2: testRevision(lockDS, lockedTemplate("busybox:1.37"))}
	h.start(h.lockConfig())
	h.connect()
	return h
}

// ask sends a desired state, then the revisions it references (an agent
// caches only those).
func (h *lockHarness) ask(gen uint64, instances ...schema.DesiredInstance) {
	h.sendDesired(gen, instances...)
	for _, in := range instances {
		for _, rev := range []schema.Revision{h.v1, h.v2} {
			if rev.Hash == in.Revision {
				h.sendRevision(rev)
			}
		}
	}
}

func (h *lockHarness) lockConfig() edgeagent.Config {
	cfg := h.config()
	cfg.UpdateLockPoll = 5 * time.Millisecond
	return cfg
}

// lockFile is the host path of rev's lock file.
func (h *lockHarness) lockFile(rev schema.Revision) string {
	return filepath.Join(h.dir, "pods", edgeagent.PodUID(testNode, lockDS, rev.Hash), "update-lock", "updates.lock")
}

// take makes the daemon of rev take its lock, as `set -C; : > lock`
// does, at since.
func (h *lockHarness) take(rev schema.Revision, since time.Time) {
	h.t.Helper()
	f, err := os.OpenFile(h.lockFile(rev), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	require.NoError(h.t, err)
	require.NoError(h.t, f.Close())
	require.NoError(h.t, os.Chtimes(h.lockFile(rev), since, since))
}

func (h *lockHarness) release(rev schema.Revision) {
	h.t.Helper()
	require.NoError(h.t, os.Remove(h.lockFile(rev)))
}

func (h *lockHarness) running(rev schema.Revision) bool {
	for _, c := range h.managed() {
		if c.Labels[edgeagent.LabelRevision] == rev.Hash && c.Running {
			return true
		}
	}
	return false
}

func (h *lockHarness) hasContainers(rev schema.Revision) bool {
	for _, c := range h.managed() {
		if c.Labels[edgeagent.LabelRevision] == rev.Hash {
			return true
		}
	}
	return false
}

func lockIs(since time.Time, deferred bool) func(schema.InstanceStatus) error {
	return func(st schema.InstanceStatus) error {
		if l := st.UpdateLock; l == nil || !l.HeldSince.Equal(since) || l.Deferred != deferred {
			return fmt.Errorf("update lock %+v, want held since %s, deferred %v", st.UpdateLock, since, deferred)
		}
		return runningReady(st)
	}
}

func noLock(st schema.InstanceStatus) error {
	if st.UpdateLock != nil {
		return fmt.Errorf("update lock %+v, want none", st.UpdateLock)
	}
	return runningReady(st)
}

// TestUpdateLockDefersTheUpdate follows the protocol on one node: a held
// lock is reported; an update to another revision is deferred (the new
// instance not started, the old kept and reported deferred); releasing the
// lock does not start it (the agent waits for the controller's answer);
// the answer (keep the old revision) clears the deferral, and the next
// request updates, the agent taking the free lock itself first.
func TestUpdateLockDefersTheUpdate(t *testing.T) {
	h := newLockHarness(t)
	h.ask(1, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)

	since := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h.take(h.v1, since)
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, false))

	h.ask(2, want(h.v2))
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, true))
	h.waitInstance(lockDS, h.v2.Hash, pendingWith("update deferred: the instance of revision "+h.v1.Hash[:10]+" holds its update lock (since 2026-01-02T03:00:00Z)"))
	assert.False(t, h.hasContainers(h.v2), "the new revision is not started")
	assert.True(t, h.running(h.v1))

	h.release(h.v1)
	h.waitPasses(3)
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, true)) // released, but the request was deferred: it waits
	assert.False(t, h.hasContainers(h.v2))

	h.ask(3, want(h.v1)) // the controller's answer
	h.waitInstance(lockDS, h.v1.Hash, noLock)

	h.ask(4, want(h.v2))
	h.waitInstance(lockDS, h.v2.Hash, runningReady)
	assert.False(t, h.hasContainers(h.v1), "the old instance is gone")
	_, err := os.Stat(filepath.Dir(h.lockFile(h.v1)))
	assert.True(t, errors.Is(err, os.ErrNotExist), "its lock directory went with it: %v", err)
	st, _ := os.Stat(filepath.Dir(h.lockFile(h.v2)))
	require.NotNil(t, st, "the new instance has a lock directory")
	assert.Equal(t, os.ModeDir|os.ModeSticky|0o777, st.Mode(), "world-writable, sticky, as /tmp")
	assert.Len(t, h.eventsWithReason("UpdateDeferred"), 1)
}

// TestUpdateLockOverride: a desired state that overrides a lock taken at
// or before its instant breaks it and updates; a lock taken later holds.
func TestUpdateLockOverride(t *testing.T) {
	h := newLockHarness(t)
	h.ask(1, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)
	since := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h.take(h.v1, since)
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, false))

	early := want(h.v2)
	early.OverrideUpdateLock = schema.FormatLockInstant(since.Add(-time.Second))
	h.ask(2, early)
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, true))
	assert.False(t, h.hasContainers(h.v2), "a lock taken after the override holds")

	forced := want(h.v2)
	forced.OverrideUpdateLock = schema.FormatLockInstant(since)
	h.ask(3, forced)
	h.waitInstance(lockDS, h.v2.Hash, runningReady)
	assert.False(t, h.hasContainers(h.v1))
	require.Len(t, h.eventsWithReason("UpdateLockOverridden"), 1)
}

// TestUpdateLockSurge: a surge pair is not started beside an instance
// that holds its lock; once it may, the agent holds the old instance's
// lock itself while the pair runs, so its daemon cannot take it, and the
// old instance goes when the controller drops it, whatever its lock.
func TestUpdateLockSurge(t *testing.T) {
	h := newLockHarness(t)
	h.ask(1, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)
	since := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h.take(h.v1, since)
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, false))

	h.ask(2, want(h.v1), want(h.v2))
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, true))
	h.waitInstance(lockDS, h.v2.Hash, pendingWith("update deferred"))
	assert.False(t, h.hasContainers(h.v2))

	h.release(h.v1)
	h.ask(3, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)
	h.ask(4, want(h.v1), want(h.v2))
	h.waitInstance(lockDS, h.v2.Hash, runningReady)
	h.waitInstance(lockDS, h.v1.Hash, noLock) // the agent's own lock is not reported
	_, err := os.OpenFile(h.lockFile(h.v1), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	assert.True(t, errors.Is(err, os.ErrExist), "the daemon finds the lock taken during the surge: %v", err)

	h.ask(5, want(h.v2))
	checkForGone(t, h, h.v1)
}

// TestUpdateLockLeavesRemovalAlone: removing the daemonset from the node
// does not wait for its lock.
func TestUpdateLockLeavesRemovalAlone(t *testing.T) {
	h := newLockHarness(t)
	h.ask(1, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)
	h.take(h.v1, time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	h.ask(2)
	checkForGone(t, h, h.v1)
}

// TestUpdateLockOnlyWhileRunning: a lock whose instance no longer runs
// holds nothing, and is removed when the agent starts the instance again.
func TestUpdateLockOnlyWhileRunning(t *testing.T) {
	h := newLockHarness(t)
	h.ask(1, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)
	h.take(h.v1, time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	h.waitInstance(lockDS, h.v1.Hash, func(st schema.InstanceStatus) error {
		if st.UpdateLock == nil {
			return errors.New("lock not reported yet")
		}
		return nil
	})
	for _, c := range h.managed() {
		require.NoError(t, h.rt.Crash(c.ID, 1))
	}
	h.waitInstance(lockDS, h.v1.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	h.clock.Advance(time.Minute)              // past the restart back-off
	h.waitInstance(lockDS, h.v1.Hash, noLock) // restarted after its crash
	_, err := os.Stat(h.lockFile(h.v1))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the crashed daemon's lock was removed: %v", err)
}

// TestUpdateLockNeedsTheAnnotation: a template that does not opt in has
// no lock directory and is updated at once.
func TestUpdateLockNeedsTheAnnotation(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	v1, v2 := testRevision(lockDS, testTemplate("busybox:1.36")), testRevision(lockDS, testTemplate("busybox:1.37"))
	h.sendDesired(1, want(v1))
	h.sendRevision(v1)
	h.waitInstance(lockDS, v1.Hash, runningReady)
	_, err := os.Stat(filepath.Join(h.dir, "pods", edgeagent.PodUID(testNode, lockDS, v1.Hash), "update-lock"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "no lock directory: %v", err)
	h.sendDesired(2, want(v2))
	h.sendRevision(v2)
	h.waitInstance(lockDS, v2.Hash, runningReady)
}

// TestUpdateLockDeferralSurvivesRestart: an agent restarted while it
// defers an update still waits for the controller's answer, even though
// the lock was released meanwhile.
func TestUpdateLockDeferralSurvivesRestart(t *testing.T) {
	h := newLockHarness(t)
	h.ask(1, want(h.v1))
	h.waitInstance(lockDS, h.v1.Hash, noLock)
	since := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h.take(h.v1, since)
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, false))
	h.ask(2, want(h.v2))
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, true))

	h.stop()
	h.release(h.v1)
	h.start(h.lockConfig())
	h.connect()
	h.waitInstance(lockDS, h.v1.Hash, lockIs(since, true))
	h.waitPasses(3)
	assert.False(t, h.hasContainers(h.v2), "the restarted agent did not act on the deferred request")
}

func checkForGone(t *testing.T, h *lockHarness, rev schema.Revision) {
	t.Helper()
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.hasContainers(rev) {
			return fmt.Errorf("revision %s still has containers", rev.Hash)
		}
		return nil
	})
}

// eventsWithReason returns the events the agent published with reason.
func (h *harness) eventsWithReason(reason string) []schema.NodeEvent {
	var out []schema.NodeEvent
	for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicEvents)) {
		var ev schema.NodeEvent
		if err := json.Unmarshal(p.payload, &ev); err == nil && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}
