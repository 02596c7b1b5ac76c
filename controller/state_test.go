package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// recordingCommitter is a committer that records what it was handed.
type recordingCommitter struct {
	committed map[string]reconcile.NodeDesired
	forgotten []string
}

func (r *recordingCommitter) Commit(node string, nd reconcile.NodeDesired) { r.committed[node] = nd }
func (r *recordingCommitter) Forget(node string)                           { r.forgotten = append(r.forgotten, node) }

var _ committer = (*recordingCommitter)(nil)

func testEntry(name string) *dsEntry {
	ds := schema.DaemonSet{Metadata: schema.ObjectMeta{Namespace: "fleet", Name: name}}
	return &dsEntry{rec: store.DaemonSetRecord{DaemonSet: ds, CurrentRevision: "rev-1"}}
}

// TestStateWritesMark: every fleetState write that changes what a pass
// decides on marks exactly what it changed, so the incremental pass
// cannot miss it; a write that changes nothing decided on marks nothing.
func TestStateWritesMark(t *testing.T) {
	const key, node = "fleet/exporter", "gw"
	tests := []struct {
		name  string
		setup func(fs *fleetState)
		write func(fs *fleetState)
		want  work
	}{
		{name: "putEntry", write: func(fs *fleetState) { fs.putEntry(testEntry("exporter")) },
			want: work{daemonsets: map[string]bool{key: true}}},
		{name: "setRecord", setup: func(fs *fleetState) { fs.putEntry(testEntry("exporter")) },
			write: func(fs *fleetState) { fs.setRecord(key, testEntry("exporter").rec) },
			want:  work{daemonsets: map[string]bool{key: true}}},
		{name: "setRollout", setup: func(fs *fleetState) { fs.putEntry(testEntry("exporter")) },
			write: func(fs *fleetState) { fs.setRollout(key, rollout.State{Target: "rev-1"}) },
			want:  work{daemonsets: map[string]bool{key: true}}},
		{name: "setRollout of a deleted daemonset", write: func(fs *fleetState) { fs.setRollout(key, rollout.State{}) }},
		{name: "deleteEntry", setup: func(fs *fleetState) { fs.putEntry(testEntry("exporter")) },
			write: func(fs *fleetState) { fs.deleteEntry(key) },
			want:  work{daemonsets: map[string]bool{key: true}}},
		{name: "updateObserved kept", write: func(fs *fleetState) {
			fs.updateObserved(node, func(uint64, schema.ObservedState, bool) (schema.ObservedState, bool) {
				return schema.ObservedState{Node: node}, true
			})
		}, want: work{nodes: map[string]bool{node: true}}},
		{name: "updateObserved refused", write: func(fs *fleetState) {
			fs.updateObserved(node, func(uint64, schema.ObservedState, bool) (schema.ObservedState, bool) {
				return schema.ObservedState{}, false
			})
		}},
		{name: "nodeChanged", write: func(fs *fleetState) { fs.nodeChanged(node) },
			want: work{nodes: map[string]bool{node: true}}},
		{name: "markNode", write: func(fs *fleetState) { fs.markNode(node) },
			want: work{nodes: map[string]bool{node: true}}},
		{name: "setCurrent", write: func(fs *fleetState) { fs.setCurrent(node, reconcile.NodeDesired{Generation: 2}) },
			want: work{nodes: map[string]bool{node: true}}},
		{name: "deleteNode", write: func(fs *fleetState) { fs.deleteNode(node, reconcile.NodeDesired{Generation: 3}) },
			want: work{nodes: map[string]bool{node: true}}},
		{name: "applyConfigs", write: func(fs *fleetState) {
			out := newApplied()
			out.configMaps["fleet/cfg"] = &store.ConfigMapRecord{}
			fs.applyConfigs(out)
		}, want: work{configs: true}},
		{name: "applyConfigs deleting a daemonset", setup: func(fs *fleetState) { fs.putEntry(testEntry("exporter")) },
			write: func(fs *fleetState) {
				out := newApplied()
				out.deleted[key] = true
				fs.applyConfigs(out)
			}, want: work{daemonsets: map[string]bool{key: true}}},
		{name: "commitRollouts", setup: func(fs *fleetState) { fs.putEntry(testEntry("exporter")) },
			write: func(fs *fleetState) { fs.commitRollouts(map[string]rollout.State{key: {Target: "rev-1"}}) }},
		{name: "setStatus", write: func(fs *fleetState) { fs.setStatus(map[string]dsStatus{key: {}}) }},
		{name: "addRevision", write: func(fs *fleetState) { fs.addRevision("rev-1", schema.Revision{}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFleetState()
			if tc.setup != nil {
				tc.setup(fs)
				fs.takeWork()
			}
			tc.write(fs)
			got := fs.takeWork()
			want := newWork()
			for k := range tc.want.nodes {
				want.nodes[k] = true
			}
			for k := range tc.want.daemonsets {
				want.daemonsets[k] = true
			}
			want.configs = tc.want.configs
			assert.Equal(t, want, got)
		})
	}
}

// TestCommitDecisionHandsChangesToTheDecider: the pass's own decision
// marks nothing (the decider made it): its desired states reach the
// decider in the same call, a forgotten node leaves no trace in the
// state, and its rollout states are kept.
func TestCommitDecisionHandsChangesToTheDecider(t *testing.T) {
	fs := newFleetState()
	fs.deleteNode("gone", reconcile.NodeDesired{Generation: 4})
	fs.takeWork()
	to := &recordingCommitter{committed: map[string]reconcile.NodeDesired{}}
	desired := map[string]reconcile.NodeDesired{"gw": {Generation: 7}}
	_, _, changed := fs.commitDecision([]string{"gone"}, desired, to)
	assert.True(t, changed)
	assert.Equal(t, desired, to.committed)
	assert.Equal(t, []string{"gone"}, to.forgotten)
	assert.True(t, fs.takeWork().empty())
	cur, ok := fs.currentOf("gw")
	assert.True(t, ok)
	assert.Equal(t, uint64(7), cur.Generation)
	_, ok = fs.currentOf("gone")
	assert.False(t, ok)
	assert.False(t, fs.facts("gone").deleted)

	_, _, changed = fs.commitDecision(nil, nil, to)
	assert.False(t, changed, "nothing to commit and no topic to compare")

	fs.putEntry(testEntry("exporter"))
	fs.takeWork()
	fs.commitRollouts(map[string]rollout.State{"fleet/exporter": {Target: "rev-2"}, "fleet/deleted": {Target: "x"}})
	e, _ := fs.entry("fleet/exporter")
	assert.Equal(t, "rev-2", e.rollout.Target, "the stepped rollout state is kept")
	_, ok = fs.entry("fleet/deleted")
	assert.False(t, ok, "a daemonset deleted meanwhile is not brought back")
	assert.True(t, fs.takeWork().empty())
}

// TestLagMarks: once the repair loop tracks lags, every change of a node's
// desired or observed state, its presence or its deletion hands the node
// to the next takeLags with the generation it lags behind (0: none), as
// does any other mark of the node (markNode: its overrides); writes that
// touch no node mark none.
func TestLagMarks(t *testing.T) {
	fs := newFleetState()
	observe := func(node string, gen uint64) {
		fs.updateObserved(node, func(uint64, schema.ObservedState, bool) (schema.ObservedState, bool) {
			return schema.ObservedState{Node: node, ObservedGeneration: gen}, true
		})
	}
	fs.setCurrent("behind", reconcile.NodeDesired{Generation: 3})
	fs.setCurrent("level", reconcile.NodeDesired{Generation: 2})
	observe("level", 2)
	assert.Nil(t, fs.takeLags(), "nothing is recorded before the repair loop tracks lags")

	assert.Equal(t, map[string]uint64{"behind": 3}, fs.trackLags())
	assert.Nil(t, fs.takeLags())

	observe("behind", 3)
	fs.setCurrent("level", reconcile.NodeDesired{Generation: 5})
	fs.nodeChanged("quiet") // a presence or status change of a node with no desired state
	assert.Equal(t, map[string]uint64{"behind": 0, "level": 5, "quiet": 0}, fs.takeLags())

	_, _, _ = fs.commitDecision(nil, map[string]reconcile.NodeDesired{"behind": {Generation: 4}}, &recordingCommitter{committed: map[string]reconcile.NodeDesired{}})
	assert.Equal(t, map[string]uint64{"behind": 4}, fs.takeLags(), "the pass's own decision is a change of lag")

	fs.deleteNode("level", reconcile.NodeDesired{Generation: 6})
	_, _, _ = fs.commitDecision([]string{"level"}, nil, &recordingCommitter{committed: map[string]reconcile.NodeDesired{}})
	assert.Equal(t, map[string]uint64{"level": 0}, fs.takeLags(), "a forgotten node lags no more")
	fs.setStatus(map[string]dsStatus{})
	fs.addRevision("rev-1", schema.Revision{})
	assert.Nil(t, fs.takeLags())

	fs.untrackLags()
	fs.setCurrent("behind", reconcile.NodeDesired{Generation: 9})
	assert.Nil(t, fs.takeLags(), "nothing is recorded once the repair loop has ended")
}
