package edgeagent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

const prefetchImageSize = 256 << 10

// prefetchHarness is a harness whose runtime pulls "app:2" (absent) over
// a link of speed bytes per second, running revision v1 of edge/app
// (busybox, present), with v2 (app:2) to prefetch.
func prefetchHarness(t *testing.T, speed int64, mods ...func(*schema.PodSpec)) (*harness, schema.Revision, schema.Revision) {
	h := newHarness(t)
	h.rt.ImageSize = func(image string) int64 {
		if image == "app:2" {
			return prefetchImageSize
		}
		return 0
	}
	h.rt.LinkBytesPerSecond = speed
	v1 := testRevision("edge/app", testTemplate("busybox:1.36"))
	v2 := testRevision("edge/app", testTemplate("app:2", mods...))
	return h, v1, v2
}

func (h *harness) sendDesiredState(gen uint64, instances, prefetch []schema.DesiredInstance) {
	ds := schema.DesiredState{SchemaVersion: schema.WireVersion, Node: testNode, Generation: gen, Instances: instances, Prefetch: prefetch}
	h.agent.HandleMessage(schema.NodeTopic(testNode, schema.TopicDesired), mustJSON(h.t, ds))
}

// waitPrefetch waits for the agent's prefetch report of rev to satisfy ok.
func (h *harness) waitPrefetch(rev schema.Revision, ok func(schema.PrefetchStatus) error) schema.PrefetchStatus {
	h.t.Helper()
	var got schema.PrefetchStatus
	checkfor.Eventually(h.t, 10*time.Second, 5*time.Millisecond, func() error {
		obs, _ := h.agent.Observed()
		for _, p := range obs.Prefetch {
			if p.DaemonSet == rev.DaemonSet && p.Revision == rev.Hash {
				got = p
				return ok(p)
			}
		}
		return fmt.Errorf("no prefetch report of %s in %+v", rev.Hash, obs.Prefetch)
	})
	return got
}

func prefetchDone(p schema.PrefetchStatus) error {
	if !p.Done {
		return fmt.Errorf("not done: %+v", p)
	}
	return nil
}

// publishedPrefetches returns the prefetch reports of every observed
// state published, oldest first.
func (h *harness) publishedPrefetches() [][]schema.PrefetchStatus {
	var out [][]schema.PrefetchStatus
	for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicObserved)) {
		var obs schema.ObservedState
		require.NoError(h.t, json.Unmarshal(p.payload, &obs))
		out = append(out, obs.Prefetch)
	}
	return out
}

// TestPrefetchDownloadsWhileOldRuns: asked to prefetch v2, the agent
// fetches v2's template and pulls its image while v1 keeps running, and
// reports the download done; switched to v2 later, it pulls nothing.
func TestPrefetchDownloadsWhileOldRuns(t *testing.T) {
	h, v1, v2 := prefetchHarness(t, 4<<20)
	h.start(h.config())
	h.connect()
	h.sendDesired(1, want(v1))
	h.sendRevision(v1)
	st := h.waitInstance("edge/app", v1.Hash, runningReady)

	h.sendDesiredState(2, []schema.DesiredInstance{want(v1)}, []schema.DesiredInstance{want(v2)})
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if !h.conn.subscribed(schema.RevisionTopic(v2.Hash)) {
			return errors.New("v2's revision not subscribed")
		}
		return nil
	})
	h.waitPrefetch(v2, func(p schema.PrefetchStatus) error {
		if p.Done {
			return errors.New("done before its template arrived")
		}
		return nil
	})
	h.sendRevision(v2)
	got := h.waitPrefetch(v2, prefetchDone)
	assert.Equal(t, schema.PrefetchStatus{DaemonSet: "edge/app", Revision: v2.Hash, BytesDone: prefetchImageSize, BytesTotal: prefetchImageSize, Done: true}, got)
	_, pulled := h.rt.PulledAt("app:2")
	assert.True(t, pulled)
	now := h.waitInstance("edge/app", v1.Hash, runningReady)
	assert.Equal(t, st.ContainerIDs, now.ContainerIDs, "v1 ran on through the download")
	assert.Zero(t, h.rt.Stats().Stops, "nothing stopped")

	pulls := h.rt.Stats().Pulls
	h.sendDesiredState(3, []schema.DesiredInstance{want(v2)}, nil)
	h.waitInstance("edge/app", v2.Hash, runningReady)
	assert.Equal(t, pulls, h.rt.Stats().Pulls, "the switch pulled nothing: the image was there")
	obs, _ := h.agent.Observed()
	assert.Empty(t, obs.Prefetch, "no prefetch asked: none reported")
}

// TestPrefetchProgressThrottled: a download's bytes are published at most
// once per report interval (by the agent's clock), its start and end at
// once.
func TestPrefetchProgressThrottled(t *testing.T) {
	h, v1, v2 := prefetchHarness(t, 512<<10) // half a second
	cfg := h.config()
	cfg.PrefetchReportInterval = time.Hour
	h.start(cfg)
	h.connect()
	h.sendRevision(v1)
	h.sendDesiredState(1, []schema.DesiredInstance{want(v1)}, []schema.DesiredInstance{want(v2)})
	h.sendRevision(v2)
	h.waitPrefetch(v2, prefetchDone)

	var midway int
	for _, reports := range h.publishedPrefetches() {
		for _, p := range reports {
			if p.BytesDone > 0 && !p.Done {
				midway++
			}
		}
	}
	assert.Zero(t, midway, "no progress published within the interval")

	// Now with the interval passing between two ticks of the transfer.
	v3 := testRevision("edge/app", testTemplate("app:3"))
	h.rt.ImageSize = func(string) int64 { return prefetchImageSize }
	h.rt.LinkBytesPerSecond = 64 << 10 // four seconds
	h.sendDesiredState(2, []schema.DesiredInstance{want(v1)}, []schema.DesiredInstance{want(v3)})
	h.sendRevision(v3)
	h.waitPrefetch(v3, func(p schema.PrefetchStatus) error {
		if p.BytesTotal == 0 {
			return errors.New("not started")
		}
		return nil
	})
	h.clock.Advance(2 * time.Hour)
	h.waitPrefetch(v3, prefetchDone)
	midway = 0
	for _, reports := range h.publishedPrefetches() {
		for _, p := range reports {
			if p.Revision == v3.Hash && p.BytesDone > 0 && !p.Done {
				midway++
			}
		}
	}
	assert.Equal(t, 1, midway, "one progress report once the interval passed")
}

// TestPrefetchFailureRetried: a failed pull is reported with its error and
// retried after the back-off, by the agent's clock.
func TestPrefetchFailureRetried(t *testing.T) {
	h, v1, v2 := prefetchHarness(t, 0)
	var failing atomic.Bool
	failing.Store(true)
	h.rt.ImagePullFailure = func(image string) error {
		if image == "app:2" && failing.Load() {
			return errors.New("registry unreachable")
		}
		return nil
	}
	h.start(h.config())
	h.connect()
	h.sendRevision(v1)
	h.sendDesiredState(1, []schema.DesiredInstance{want(v1)}, []schema.DesiredInstance{want(v2)})
	h.sendRevision(v2)
	failed := h.waitPrefetch(v2, func(p schema.PrefetchStatus) error {
		if p.Error == "" {
			return fmt.Errorf("no error yet: %+v", p)
		}
		return nil
	})
	assert.Contains(t, failed.Error, "registry unreachable")
	assert.False(t, failed.Done)

	failing.Store(false)
	h.waitPasses(3)
	still, _ := h.agent.Observed()
	require.Len(t, still.Prefetch, 1)
	assert.False(t, still.Prefetch[0].Done, "no retry before the back-off ends")
	h.clock.Advance(time.Minute)
	got := h.waitPrefetch(v2, prefetchDone)
	assert.Empty(t, got.Error, "the error is cleared once an attempt succeeds")
}

// TestPrefetchWithdrawn: a prefetch the desired state no longer asks for
// is cancelled and no longer reported; asked again, it resumes where the
// transfer stopped.
func TestPrefetchWithdrawn(t *testing.T) {
	h, v1, v2 := prefetchHarness(t, 128<<10) // two seconds
	cfg := h.config()
	cfg.Clock, cfg.PrefetchReportInterval = time.Now, 10*time.Millisecond // progress reports as it goes
	h.start(cfg)
	h.connect()
	h.sendRevision(v1)
	h.sendDesiredState(1, []schema.DesiredInstance{want(v1)}, []schema.DesiredInstance{want(v2)})
	h.sendRevision(v2)
	var stoppedAt int64
	h.waitPrefetch(v2, func(p schema.PrefetchStatus) error {
		if p.BytesDone == 0 {
			return errors.New("no bytes yet")
		}
		stoppedAt = p.BytesDone
		return nil
	})
	h.sendDesiredState(2, []schema.DesiredInstance{want(v1)}, nil)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if obs, _ := h.agent.Observed(); len(obs.Prefetch) > 0 {
			return fmt.Errorf("still reported: %+v", obs.Prefetch)
		}
		return nil
	})
	_, pulled := h.rt.PulledAt("app:2")
	assert.False(t, pulled, "the withdrawn download did not finish")

	h.sendDesiredState(3, []schema.DesiredInstance{want(v1)}, []schema.DesiredInstance{want(v2)})
	h.sendRevision(v2) // the broker's retained copy, on the new subscription
	var first int64 = -1
	h.waitPrefetch(v2, func(p schema.PrefetchStatus) error {
		if first < 0 && p.BytesDone > 0 {
			first = p.BytesDone
		}
		return prefetchDone(p)
	})
	if first >= 0 {
		assert.GreaterOrEqual(t, first, stoppedAt, "resumed, not restarted")
	}
}
