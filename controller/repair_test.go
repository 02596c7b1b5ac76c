package controller

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

func TestLagTrackerDue(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type round struct {
		at      time.Time
		lagging map[string]uint64
		limit   int
		want    []string
	}
	tests := []struct {
		name   string
		rounds []round
	}{
		{"a lag is due after 10s, then after 20s, 40s, then every 160s", []round{
			{at(0), map[string]uint64{"a": 3}, 10, nil},
			{at(9), map[string]uint64{"a": 3}, 10, nil},
			{at(10), map[string]uint64{"a": 3}, 10, []string{"a"}},
			{at(29), map[string]uint64{"a": 3}, 10, nil},
			{at(30), map[string]uint64{"a": 3}, 10, []string{"a"}},
			{at(70), map[string]uint64{"a": 3}, 10, []string{"a"}},
			{at(150), map[string]uint64{"a": 3}, 10, []string{"a"}},
			{at(309), map[string]uint64{"a": 3}, 10, nil},
			{at(310), map[string]uint64{"a": 3}, 10, []string{"a"}},
			{at(470), map[string]uint64{"a": 3}, 10, []string{"a"}},
		}},
		{"a node that caught up starts over", []round{
			{at(0), map[string]uint64{"a": 3}, 10, nil},
			{at(5), map[string]uint64{}, 10, nil},
			{at(10), map[string]uint64{"a": 3}, 10, nil},
			{at(20), map[string]uint64{"a": 3}, 10, []string{"a"}},
		}},
		{"a new generation starts over", []round{
			{at(0), map[string]uint64{"a": 3}, 10, nil},
			{at(10), map[string]uint64{"a": 4}, 10, nil},
			{at(19), map[string]uint64{"a": 4}, 10, nil},
			{at(20), map[string]uint64{"a": 4}, 10, []string{"a"}},
		}},
		{"the longest lagging go first, by name among equals, within the limit", []round{
			{at(0), map[string]uint64{"c": 1}, 2, nil},
			{at(1), map[string]uint64{"c": 1, "b": 1, "a": 1}, 2, nil},
			{at(11), map[string]uint64{"c": 1, "b": 1, "a": 1}, 2, []string{"c", "a"}},
			{at(12), map[string]uint64{"c": 1, "b": 1, "a": 1}, 2, []string{"b"}},
		}},
		{"the longest overdue go first: a node republished waits behind one never republished", []round{
			{at(0), map[string]uint64{"a": 1}, 1, nil},
			{at(10), map[string]uint64{"a": 1}, 1, []string{"a"}}, // a: next at 30
			{at(15), map[string]uint64{"a": 1, "b": 1}, 1, nil},   // b: due at 25
			{at(30), map[string]uint64{"a": 1, "b": 1}, 1, []string{"b"}},
			{at(31), map[string]uint64{"a": 1, "b": 1}, 1, []string{"a"}},
		}},
		{"a node that leaves and comes back while others lag starts over alone", []round{
			{at(0), map[string]uint64{"a": 1, "b": 2}, 10, nil},
			{at(5), map[string]uint64{"a": 1}, 10, nil},
			{at(6), map[string]uint64{"a": 1, "b": 2}, 10, nil},
			{at(10), map[string]uint64{"a": 1, "b": 2}, 10, []string{"a"}},
			{at(16), map[string]uint64{"a": 1, "b": 2}, 10, []string{"b"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lt := newLagTracker(10 * time.Second)
			for i, r := range tt.rounds {
				tellLags(lt, r.at, r.lagging)
				assert.Equal(t, r.want, lt.due(r.at, r.limit), "round %d at %s", i, r.at.Sub(t0))
			}
			assert.Len(t, lt.queue, len(lt.lags), "every lag is queued once")
		})
	}
}

// TestLagTrackerForgetsOfflineNodes: a lagging node that goes offline is
// not repaired; back online and still lagging, it starts over.
func TestLagTrackerForgetsOfflineNodes(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	online := map[string]bool{"a": true, "b": true}
	isOnline := func(node string) bool { return online[node] }
	lt := newLagTracker(10 * time.Second)
	lt.tell(map[string]uint64{"a": 3, "b": 3}, isOnline, at(0))

	online["a"] = false // its presence changed: the state marks it, still lagging
	lt.tell(map[string]uint64{"a": 3}, isOnline, at(5))
	assert.Equal(t, []string{"b"}, lt.due(at(10), 10), "an offline node is not repaired")

	online["a"] = true
	lt.tell(map[string]uint64{"a": 3}, isOnline, at(12))
	assert.Empty(t, lt.due(at(21), 10))
	assert.Equal(t, []string{"a"}, lt.due(at(22), 10), "back online, its lag starts over")
}

// tellLags tells lt the changes that bring it to lagging, the nodes
// lagging at now, as the repair loop does from the state's marks.
func tellLags(lt *lagTracker, now time.Time, lagging map[string]uint64) {
	changed := maps.Clone(lagging)
	for node := range lt.lags {
		if _, ok := lagging[node]; !ok {
			changed[node] = 0
		}
	}
	lt.tell(changed, func(string) bool { return true }, now)
}

// TestLagTrackerAgreesWithAScan: over random rounds of lags appearing,
// changing generation and ending, the tracker's heap returns what a scan
// of every lag returns (the tracker's earlier design, with its order
// among due nodes: longest overdue, then longest lagging, then name), and
// every queued lag knows its place in the heap.
func TestLagTrackerAgreesWithAScan(t *testing.T) {
	const after = 10 * time.Second
	rng := rand.New(rand.NewPCG(14, 7))
	for trial := range 50 {
		lt := newLagTracker(after)
		ref := map[string]lag{} // by node: generation, since, next, wait
		lagging := map[string]uint64{}
		now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
		for round := range 200 {
			now = now.Add(time.Duration(rng.IntN(8000)) * time.Millisecond)
			for range rng.IntN(4) {
				node := fmt.Sprintf("n%02d", rng.IntN(30))
				switch rng.IntN(3) {
				case 0:
					delete(lagging, node)
				default:
					lagging[node] = uint64(1 + rng.IntN(3))
				}
			}
			limit := 1 + rng.IntN(5)
			tellLags(lt, now, lagging)
			got := lt.due(now, limit)
			want := scanDue(ref, after, now, lagging, limit)
			require.Equal(t, want, got, "trial %d round %d", trial, round)
			for i, l := range lt.queue {
				require.Equal(t, i, l.index, "trial %d round %d: %s's heap index", trial, round, l.node)
			}
		}
	}
}

// scanDue is the reference: every lag scanned per round, the due ones
// sorted by when they were due, then since, then name.
func scanDue(ref map[string]lag, after time.Duration, now time.Time, lagging map[string]uint64, limit int) []string {
	for node := range ref {
		if _, ok := lagging[node]; !ok {
			delete(ref, node)
		}
	}
	var due []lag
	for node, gen := range lagging {
		l, ok := ref[node]
		if !ok || l.generation != gen {
			l = lag{node: node, generation: gen, since: now, next: now.Add(after), wait: after}
			ref[node] = l
		}
		if !now.Before(l.next) {
			due = append(due, l)
		}
	}
	slices.SortFunc(due, func(a, b lag) int {
		if c := a.next.Compare(b.next); c != 0 {
			return c
		}
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return cmp.Compare(a.node, b.node)
	})
	var out []string
	for _, l := range due[:min(limit, len(due))] {
		l.wait = min(2*l.wait, repairBackoff*after)
		l.next = now.Add(l.wait)
		ref[l.node] = l
		out = append(out, l.node)
	}
	return out
}

// TestDesiredRepairRepublishesToALaggingNode: a node online that never
// reports the generation of the desired state it was sent (as one that
// missed the message would) gets it again, the same generation; once it
// reports it, the repairs stop counting for it.
func TestDesiredRepairRepublishesToALaggingNode(t *testing.T) {
	tc := startController(t, Config{DesiredRepairAfter: 50 * time.Millisecond})
	tc.applyYAML(t, exporterYAML)
	deaf := startNode(t, tc.brokerURL(), tc.secret, gateway("gw-deaf", nil))
	deaf.expectDaemonSets(exporter)
	first, _ := deaf.lastDesired()

	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if n := deaf.received(first.Generation); n < 3 {
			return fmt.Errorf("gw-deaf received generation %d %d times", first.Generation, n)
		}
		return nil
	})
	last, _ := deaf.lastDesired()
	assert.Equal(t, first.Generation, last.Generation, "a repair republishes, it does not make a new generation")
	assert.GreaterOrEqual(t, counterValue(tc.metrics.desiredRepairs), 2.0)
	assert.Equal(t, 1.0, gaugeValue(tc.metrics.desiredLagging), "edgeset_desired_lagging_nodes")

	deaf.report(healthy()(first))
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if d, o := tc.state.generations("gw-deaf"); o != d {
			return fmt.Errorf("observed generation %d of %d", o, d)
		}
		return nil
	})
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if v := gaugeValue(tc.metrics.desiredLagging); v != 0 {
			return fmt.Errorf("edgeset_desired_lagging_nodes %v after the node caught up", v)
		}
		return nil
	})
	// The repairs stop: the round that counted the node caught up did so
	// before choosing whom to repair, so the count stays where it is for
	// more rounds than the longest wait between two repairs of a node that
	// lags (repairBackoff x after, four rounds per after).
	repairs := counterValue(tc.metrics.desiredRepairs)
	rounds := tc.repairRounds.Load()
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if n := tc.repairRounds.Load() - rounds; n <= 4*repairBackoff {
			return fmt.Errorf("%d repair rounds since the node caught up", n)
		}
		return nil
	})
	assert.Equal(t, repairs, counterValue(tc.metrics.desiredRepairs), "a node that reported its generation is not repaired")
}

// received counts the desired states of generation gen the node received.
func (n *fakeNode) received(gen uint64) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	for _, d := range n.desired {
		if d.Generation == gen {
			count++
		}
	}
	return count
}

// BenchmarkRepairRound: one round of the repair loop in a fleet of
// 100,000 online nodes with a desired state each, one node changed since
// the last round: settled (no node lags), and with every node lagging (as
// in the scale benchmarks, whose agents never report), the round
// republishing the 1,000 due. A round costs the changes and the nodes
// due, not the fleet.
func BenchmarkRepairRound(b *testing.B) {
	const nodes = 100_000
	for _, lagging := range []bool{false, true} {
		b.Run(fmt.Sprintf("lagging=%v", lagging), func(b *testing.B) {
			fs, reg := newFleetState(), registry.New()
			t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
			for i := range nodes {
				name := fmt.Sprintf("node-%06d", i)
				reg.ApplyStatus(schema.NodeStatus{SchemaVersion: schema.WireVersion, Node: name}, t0)
				reg.ApplyPresence(schema.Presence{SchemaVersion: schema.WireVersion, Node: name, Online: true, Session: 1}, t0)
				fs.setCurrent(name, reconcile.NodeDesired{Generation: 2})
				if !lagging {
					fs.updateObserved(name, func(uint64, schema.ObservedState, bool) (schema.ObservedState, bool) {
						return schema.ObservedState{Node: name, ObservedGeneration: 2}, true
					})
				}
			}
			online := func(node string) bool { st, ok := reg.State(node); return ok && st.Online }
			lags := newLagTracker(30 * time.Second)
			lags.tell(fs.trackLags(), online, t0)
			now := t0.Add(time.Hour) // every lag due
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				fs.markNode("node-000007")
				lags.tell(fs.takeLags(), online, now)
				lags.due(now, repairBatch)
				now = now.Add(7500 * time.Millisecond)
			}
		})
	}
}
