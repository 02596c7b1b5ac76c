package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lt := newLagTracker(10 * time.Second)
			for i, r := range tt.rounds {
				assert.Equal(t, r.want, lt.due(r.at, r.lagging, r.limit), "round %d at %s", i, r.at.Sub(t0))
			}
		})
	}
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

	deaf.report(healthy()(first))
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if d, o := tc.state.generations("gw-deaf"); o != d {
			return fmt.Errorf("observed generation %d of %d", o, d)
		}
		return nil
	})
	require.Empty(t, tc.state.lagging(map[string]bool{"gw-deaf": true}), "a node that reported its generation does not lag")
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
