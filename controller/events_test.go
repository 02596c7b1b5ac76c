package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// metricValue returns the value of the counter or gauge name with labels
// (label name, value, ...) in reg, or 0 if it has no such series.
func metricValue(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// fakeClock is a settable clock for the event sink.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// testSink returns an event sink on a fresh store, on a fake clock,
// flushed by the test (sync) rather than by Run.
func testSink(t *testing.T, maxEvents int, limits eventLimits) (*eventSink, *store.Store, *fakeClock) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "edgeset.db"), store.Options{MaxEvents: maxEvents})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newEventSink(st, testLogger(t), newMetrics(), limits)
	s.now = clock.now
	require.NoError(t, s.load())
	return s, st, clock
}

// sync stores what is queued, as Run does.
func (s *eventSink) sync() { s.flush(s.drain(nil)) }

var defaultEventLimits = eventLimits{perNode: 1000, rate: DefaultNodeEventRate, burst: DefaultNodeEventBurst, seriesWindow: DefaultEventSeriesWindow}

func countBy(events []store.Event, object string) int {
	n := 0
	for _, e := range events {
		if e.Object == object {
			n++
		}
	}
	return n
}

// TestNodeEventFloodKeepsHistory: 12,000 events from one node used to
// replace every stored event (the Applied and Rollout history of the
// daemonsets) with events_dropped_total at 0. A node's events pass its
// token bucket, a node holds at most its cap of stored events (its newest
// evicting its oldest), and what is dropped is counted by reason.
func TestNodeEventFloodKeepsHistory(t *testing.T) {
	s, st, clock := testSink(t, 10000, defaultEventLimits)
	for i := range 20 {
		s.add(dsObject(fmt.Sprintf("default/ds-%d", i)), schema.EventNormal, "Applied", "created")
		s.add(dsObject(fmt.Sprintf("default/ds-%d", i)), schema.EventNormal, "RolloutComplete", "revision 1 on every node")
	}
	for i := range 5 {
		s.addFromNode("quiet", store.Event{Type: schema.EventWarning, Reason: "BackOff", Object: nodeObject("quiet"), Message: fmt.Sprint("crash ", i)})
	}
	s.sync()

	// A flood as the issue's: 12,000 distinct events in 0.8 s.
	flood := func(n int, every time.Duration) {
		for i := range n {
			clock.advance(every)
			s.addFromNode("noisy", store.Event{Type: schema.EventWarning, Reason: "Failed", Object: nodeObject("noisy"), Message: fmt.Sprint("failure ", i)})
			if i%1000 == 999 {
				s.sync()
			}
		}
		s.sync()
	}
	flood(12000, 800*time.Second/12000/1000)
	dropped := func(reason string) float64 {
		return metricValue(t, s.metrics.reg, "edgeset_events_dropped_total", "reason", reason)
	}
	limited := dropped(dropRateLimited)
	assert.GreaterOrEqual(t, limited, float64(12000-DefaultNodeEventBurst-DefaultNodeEventRate), "the node's token bucket holds the flood")
	events, err := st.ListEvents(store.EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, 12000-int(limited), countBy(events, nodeObject("noisy")), "what passes the bucket is stored")

	// A slower flood, within the rate for hours, fills only the node's cap.
	flood(12000, time.Second/DefaultNodeEventRate)
	events, err = st.ListEvents(store.EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, 1000, countBy(events, nodeObject("noisy")), "the node keeps its newest 1000")
	assert.Equal(t, "failure 11999", events[len(events)-1].Message)
	assert.Equal(t, 5, countBy(events, nodeObject("quiet")), "other nodes keep their events")
	for i := range 20 {
		obj := dsObject(fmt.Sprintf("default/ds-%d", i))
		assert.Equal(t, 2, countBy(events, obj), "%s keeps its Applied and Rollout history", obj)
	}
	assert.Greater(t, dropped(dropNodeCap), float64(0), "evictions by the cap are counted")
	assert.Zero(t, dropped(dropQueueFull))
}

// TestRepeatedEventsFoldIntoSeries: the same event again (same object,
// type, reason, message) within the series window raises Count and
// LastTime of the stored one, as Kubernetes' event series; after the
// window it is stored anew.
func TestRepeatedEventsFoldIntoSeries(t *testing.T) {
	s, st, clock := testSink(t, 100, defaultEventLimits)
	first := clock.now()
	crash := store.Event{Type: schema.EventWarning, Reason: "BackOff", Object: nodeObject("gw"), Message: "back-off restarting failed container"}
	for range 30 {
		clock.advance(time.Second)
		s.addFromNode("gw", crash)
	}
	s.sync() // 30 in one batch
	for range 10 {
		clock.advance(time.Second)
		s.addFromNode("gw", crash)
		s.sync() // one per batch, folding into the stored event
	}
	s.add(nodeObject("gw"), schema.EventNormal, "NodeOnline", "agent connected")
	s.sync()
	events, err := st.ListEvents(store.EventFilter{})
	require.NoError(t, err)
	require.Len(t, events, 2)
	assert.Equal(t, int32(40), events[0].Count)
	assert.True(t, events[0].Time.Equal(first.Add(time.Second)), "Time is the first occurrence")
	assert.True(t, events[0].LastTime.Equal(first.Add(40*time.Second)), "LastTime is the last")
	assert.Equal(t, "gw", events[0].Source)
	assert.Equal(t, float64(39), metricValue(t, s.metrics.reg, "edgeset_events_folded_total"))

	clock.advance(DefaultEventSeriesWindow + time.Second)
	s.addFromNode("gw", crash)
	s.sync()
	events, err = st.ListEvents(store.EventFilter{})
	require.NoError(t, err)
	require.Len(t, events, 3, "after the window a repeat starts a new series")
	assert.Zero(t, events[2].Count)

	// A restarted sink continues the stored series.
	s2 := newEventSink(st, testLogger(t), newMetrics(), defaultEventLimits)
	s2.now = clock.now
	require.NoError(t, s2.load())
	clock.advance(time.Second)
	s2.addFromNode("gw", crash)
	s2.sync()
	events, err = st.ListEvents(store.EventFilter{})
	require.NoError(t, err)
	require.Len(t, events, 3)
	assert.Equal(t, int32(2), events[2].Count)
}

// TestNodeEventFloodOverMQTT: the attack through the broker. A
// node publishing 12,000 events as fast as it can neither removes the
// daemonset's history nor goes uncounted.
func TestNodeEventFloodOverMQTT(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("noisy", nil))
	n.expectDaemonSets(exporter)
	ctx := context.Background()
	history := func() ([]api.Event, error) {
		return tc.api.Events(ctx, api.EventFilter{Object: dsObject(exporter), Limit: 10000})
	}
	before, err := history()
	require.NoError(t, err)
	require.NotEmpty(t, before)

	for i := range 12000 {
		payload, err := schema.Encode(schema.NodeEvent{SchemaVersion: schema.WireVersion, Node: "noisy", Time: time.Now(),
			Type: schema.EventWarning, Reason: "Flood", Message: fmt.Sprint("event ", i)})
		require.NoError(t, err)
		require.NoError(t, n.client.Publish(ctx, schema.NodeTopic("noisy", schema.TopicEvents), payload, false))
	}
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := metricValue(t, tc.metrics.reg, "edgeset_events_dropped_total", "reason", dropRateLimited); got < 1000 {
			return fmt.Errorf("%v events dropped by the rate limit", got)
		}
		return nil
	})
	after, err := history()
	require.NoError(t, err)
	assert.Equal(t, before, after[:len(before)], "the daemonset's history survives")
	evs, err := tc.api.Events(ctx, api.EventFilter{Object: nodeObject("noisy"), Limit: 10000})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(evs), DefaultMaxEvents/10, "the node holds at most its cap")
}

// TestManyNodesKeepControllerHistory: a node's cap alone did not keep the
// controller's history. Twelve nodes each storing their cap (1,000) filled
// all 10,000 places, and the store's trim of the oldest events removed the
// daemonsets' Applied and Rollout events. Node-caused events are a pool of
// their own (at most max-node-events): trimming for them evicts the oldest
// node-caused event, never the controller's.
func TestManyNodesKeepControllerHistory(t *testing.T) {
	s, st, clock := testSink(t, 10000, defaultEventLimits)
	for i := range 20 {
		s.add(dsObject(fmt.Sprintf("default/ds-%d", i)), schema.EventNormal, "Applied", "created")
		s.add(dsObject(fmt.Sprintf("default/ds-%d", i)), schema.EventNormal, "RolloutComplete", "revision 1 on every node")
	}
	s.sync()
	const nodes = 12
	for i := range defaultEventLimits.perNode {
		clock.advance(time.Second / DefaultNodeEventRate) // within every node's rate
		for n := range nodes {
			node := fmt.Sprintf("gw-%d", n)
			s.addFromNode(node, store.Event{Type: schema.EventWarning, Reason: "Failed", Object: nodeObject(node), Message: fmt.Sprint("failure ", i)})
		}
		if i%100 == 99 {
			s.sync()
		}
	}
	s.sync()
	require.Zero(t, metricValue(t, s.metrics.reg, "edgeset_events_dropped_total", "reason", dropRateLimited), "every node within its rate")

	events, err := st.ListEvents(store.EventFilter{})
	require.NoError(t, err)
	for i := range 20 {
		obj := dsObject(fmt.Sprintf("default/ds-%d", i))
		assert.Equal(t, 2, countBy(events, obj), "%s keeps its Applied and Rollout history", obj)
	}
	fromNodes := 0
	for _, e := range events {
		if e.Source != "" {
			fromNodes++
		}
	}
	assert.Equal(t, 10000/2, fromNodes, "node-caused events hold max-node-events places")
	assert.Equal(t, "failure 999", events[len(events)-1].Message, "the newest node events are kept")
}

// TestConfigNodeEventLimits: max-node-events defaults to half of
// max-events and may not exceed it; a node's cap may not exceed what all
// nodes together may store. Each refusal names its key.
func TestConfigNodeEventLimits(t *testing.T) {
	cases := []struct {
		name                   string
		cfg                    Config
		wantNodes, wantPerNode int
		wantErr                string
	}{
		{"defaults", Config{}, 5000, 1000, ""},
		{"half of max-events", Config{MaxEvents: 300}, 150, 30, ""},
		{"all of max-events", Config{MaxEvents: 300, MaxNodeEvents: 300}, 300, 30, ""},
		{"a small pool bounds the default per-node cap", Config{MaxNodeEvents: 200}, 200, 200, ""},
		{"above max-events", Config{MaxEvents: 300, MaxNodeEvents: 301}, 0, 0, "max-node-events: must not exceed max-events (300), got 301"},
		{"negative", Config{MaxNodeEvents: -1}, 0, 0, "max-node-events: must not be negative"},
		{"negative max-events", Config{MaxEvents: -1}, 0, 0, "max-events: must not be negative"},
		{"per-node cap above the pool", Config{MaxNodeEvents: 200, MaxEventsPerNode: 201}, 0, 0, "max-events-per-node: must not exceed max-node-events (200), got 201"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.ApplyDefaults()
			err := cfg.Validate()
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantNodes, cfg.MaxNodeEvents)
			assert.Equal(t, tc.wantPerNode, cfg.MaxEventsPerNode)
		})
	}
}
