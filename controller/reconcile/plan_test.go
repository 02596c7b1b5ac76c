package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

var (
	edge      = map[string]string{"role": "edge"}
	gateway   = map[string]string{"role": "gateway"}
	logs      = dsSpec{name: "logs"}
	edgeAgent = dsSpec{name: "edge-agent", selector: edge}
	dedicated = schema.Taint{Key: "dedicated", Value: "ops", Effect: schema.TaintNoExecute}
	noSched   = schema.Taint{Key: "maintenance", Effect: schema.TaintNoSchedule}
)

func TestPlan(t *testing.T) {
	cases := []struct {
		name    string
		nodes   []schema.Node
		ds      []dsSpec
		orphans []string // daemonset names orphaned
		current map[string]NodeDesired
		offline []string // nodes offline; every other node of nodes is online
		now     time.Time

		wantDesired     map[string]NodeDesired
		wantScheduled   []string
		wantUpdated     []string
		wantUnscheduled []string
		wantEvicted     []string
		wantForget      []string
		wantRequeue     time.Time
	}{
		{
			name:          "node joins and gets the daemons it matches",
			nodes:         []schema.Node{node("n1", edge)},
			ds:            []dsSpec{logs, edgeAgent, {name: "gw", selector: gateway}},
			wantDesired:   map[string]NodeDesired{"n1": desired(1, inst("edge-agent", "r1"), inst("logs", "r1"))},
			wantScheduled: []string{"n1 default/edge-agent Scheduled", "n1 default/logs Scheduled"},
		},
		{
			name:        "node matching nothing gets an empty first state",
			nodes:       []schema.Node{node("n1", gateway)},
			ds:          []dsSpec{edgeAgent},
			wantDesired: map[string]NodeDesired{"n1": desired(1)},
		},
		{
			name:    "unchanged node is not republished",
			nodes:   []schema.Node{node("n1", edge)},
			ds:      []dsSpec{logs, edgeAgent},
			current: map[string]NodeDesired{"n1": desired(7, inst("edge-agent", "r1"), inst("logs", "r1"))},
		},
		{
			name:          "label added schedules",
			nodes:         []schema.Node{node("n1", edge)},
			ds:            []dsSpec{edgeAgent},
			current:       map[string]NodeDesired{"n1": desired(3)},
			wantDesired:   map[string]NodeDesired{"n1": desired(4, inst("edge-agent", "r1"))},
			wantScheduled: []string{"n1 default/edge-agent Scheduled"},
		},
		{
			name:            "label removed unschedules",
			nodes:           []schema.Node{node("n1", gateway)},
			ds:              []dsSpec{logs, edgeAgent},
			current:         map[string]NodeDesired{"n1": desired(3, inst("edge-agent", "r1"), inst("logs", "r1"))},
			wantDesired:     map[string]NodeDesired{"n1": desired(4, inst("logs", "r1"))},
			wantUnscheduled: []string{"n1 default/edge-agent NodeSelectorMismatch"},
		},
		{
			name:        "untolerated NoExecute taint evicts",
			nodes:       []schema.Node{node("n1", edge, dedicated)},
			ds:          []dsSpec{logs},
			current:     map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
			wantDesired: map[string]NodeDesired{"n1": desired(4)},
			wantEvicted: []string{"n1 default/logs UntoleratedNoExecuteTaint"},
		},
		{
			name:  "tolerated NoExecute taint keeps",
			nodes: []schema.Node{node("n1", edge, dedicated)},
			ds: []dsSpec{{name: "logs", tolerations: []schema.Toleration{
				{Key: "dedicated", Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute}}}},
			current: map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
		},
		{
			name: "toleration with seconds keeps until it runs out and requeues then",
			nodes: []schema.Node{node("n1", edge, schema.Taint{Key: "dedicated", Effect: schema.TaintNoExecute,
				TimeAdded: ptr(at(-time.Minute))})},
			ds: []dsSpec{{name: "logs", tolerations: []schema.Toleration{
				{Key: "dedicated", Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute, TolerationSeconds: ptr(int64(300))}}}},
			current:     map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
			wantRequeue: at(4 * time.Minute),
		},
		{
			name: "toleration that ran out evicts",
			nodes: []schema.Node{node("n1", edge, schema.Taint{Key: "dedicated", Effect: schema.TaintNoExecute,
				TimeAdded: ptr(at(-5 * time.Minute))})},
			ds: []dsSpec{{name: "logs", tolerations: []schema.Toleration{
				{Key: "dedicated", Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute, TolerationSeconds: ptr(int64(300))}}}},
			current:     map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
			wantDesired: map[string]NodeDesired{"n1": desired(4)},
			wantEvicted: []string{"n1 default/logs TolerationExpired"},
		},
		{
			name:    "untolerated NoSchedule keeps a running instance",
			nodes:   []schema.Node{node("n1", edge, noSched)},
			ds:      []dsSpec{logs},
			current: map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
		},
		{
			name:    "untolerated NoSchedule adds no new instance",
			nodes:   []schema.Node{node("n1", edge, noSched)},
			ds:      []dsSpec{logs, edgeAgent},
			current: map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
		},
		{
			name:    "cordoned node keeps its daemons",
			nodes:   []schema.Node{{Name: "n1", Labels: edge, Unschedulable: true}},
			ds:      []dsSpec{logs},
			current: map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
		},
		{
			name:          "cordoned node still gets daemons, as in Kubernetes",
			nodes:         []schema.Node{{Name: "n1", Labels: edge, Unschedulable: true}},
			ds:            []dsSpec{logs},
			current:       map[string]NodeDesired{"n1": desired(3)},
			wantDesired:   map[string]NodeDesired{"n1": desired(4, inst("logs", "r1"))},
			wantScheduled: []string{"n1 default/logs Scheduled"},
		},
		{
			name: "offline unreachable node keeps its desired state and generation",
			nodes: []schema.Node{node("n1", edge, schema.Taint{Key: schema.TaintNodeUnreachable, Effect: schema.TaintNoExecute,
				TimeAdded: ptr(at(-time.Hour))})},
			ds:      []dsSpec{logs, edgeAgent},
			current: map[string]NodeDesired{"n1": desired(3, inst("edge-agent", "r1"), inst("logs", "r1"))},
			offline: []string{"n1"},
		},
		{
			name:          "offline node still gets a changed state, retained for its return",
			nodes:         []schema.Node{node("n1", edge)},
			ds:            []dsSpec{logs, edgeAgent},
			current:       map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
			offline:       []string{"n1"},
			wantDesired:   map[string]NodeDesired{"n1": desired(4, inst("edge-agent", "r1"), inst("logs", "r1"))},
			wantScheduled: []string{"n1 default/edge-agent Scheduled"},
		},
		{
			name:            "deleted daemonset is cleared",
			nodes:           []schema.Node{node("n1", edge)},
			ds:              []dsSpec{logs},
			current:         map[string]NodeDesired{"n1": desired(3, inst("aaa", "r9"), inst("edge-agent", "r1"), inst("logs", "r1"), inst("zzz", "r1"))},
			wantDesired:     map[string]NodeDesired{"n1": desired(4, inst("logs", "r1"))},
			wantUnscheduled: []string{"n1 default/aaa DaemonSetDeleted", "n1 default/edge-agent DaemonSetDeleted", "n1 default/zzz DaemonSetDeleted"},
		},
		{
			name:            "deleted node gets an empty state once",
			nodes:           []schema.Node{node("n1", edge)},
			ds:              []dsSpec{logs},
			current:         map[string]NodeDesired{"n1": desired(1, inst("logs", "r1")), "gone": desired(5, inst("logs", "r1"))},
			wantDesired:     map[string]NodeDesired{"gone": desired(6)},
			wantUnscheduled: []string{"gone default/logs NodeDeleted"},
		},
		{
			name:       "deleted node with an empty state is forgotten",
			nodes:      []schema.Node{node("n1", edge)},
			ds:         []dsSpec{logs},
			current:    map[string]NodeDesired{"n1": desired(1, inst("logs", "r1")), "gone": desired(6), "b-gone": desired(2)},
			wantForget: []string{"b-gone", "gone"},
		},
		{
			name:        "new revision replaces the old one",
			nodes:       []schema.Node{node("n1", edge)},
			ds:          []dsSpec{{name: "logs", revision: "r2"}},
			current:     map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"))},
			wantDesired: map[string]NodeDesired{"n1": desired(4, inst("logs", "r2"))},
			wantUpdated: []string{"n1 default/logs Updated"},
		},
		{
			name:        "two instances of one daemonset collapse to one",
			nodes:       []schema.Node{node("n1", edge)},
			ds:          []dsSpec{{name: "logs", revision: "r2"}},
			current:     map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"), inst("logs", "r2"))},
			wantDesired: map[string]NodeDesired{"n1": desired(4, inst("logs", "r2"))},
			wantUpdated: []string{"n1 default/logs Updated"},
		},
		{
			name:        "unsorted current state is republished sorted",
			nodes:       []schema.Node{node("n1", edge)},
			ds:          []dsSpec{logs, edgeAgent},
			current:     map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"), inst("edge-agent", "r1"))},
			wantDesired: map[string]NodeDesired{"n1": desired(4, inst("edge-agent", "r1"), inst("logs", "r1"))},
		},
		{
			name:    "orphaned daemonset is frozen where it runs and placed nowhere else",
			nodes:   []schema.Node{node("n1", gateway), node("n2", edge)},
			ds:      []dsSpec{logs},
			orphans: []string{"edge-agent"},
			current: map[string]NodeDesired{
				"n1": desired(3, inst("edge-agent", "old"), inst("logs", "r1")),
				"n2": desired(3, inst("logs", "r1")),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: tc.now, Nodes: tc.nodes, Current: tc.current, Online: map[string]bool{}}
			if in.Now.IsZero() {
				in.Now = t0
			}
			for _, s := range tc.ds {
				in.DaemonSets = append(in.DaemonSets, compile(t, s))
			}
			for _, o := range tc.orphans {
				in.DaemonSets = append(in.DaemonSets, DaemonSetState{Key: "default/" + o, Orphan: true})
			}
			for _, n := range tc.nodes {
				in.Online[n.Name] = true
			}
			for _, n := range tc.offline {
				in.Online[n] = false
			}
			out := Plan(in)
			want := tc.wantDesired
			if want == nil {
				want = map[string]NodeDesired{}
			}
			assert.Equal(t, want, out.Desired)
			assert.Equal(t, tc.wantScheduled, keys(out.Scheduled), "scheduled")
			assert.Equal(t, tc.wantUpdated, keys(out.Updated), "updated")
			assert.Equal(t, tc.wantUnscheduled, keys(out.Unscheduled), "unscheduled")
			assert.Equal(t, tc.wantEvicted, keys(out.Evicted), "evicted")
			assert.Equal(t, tc.wantForget, out.Forget, "forget")
			assert.Equal(t, tc.wantRequeue, out.RequeueAt, "requeue")

			again := Plan(Input{Now: in.Now, Nodes: in.Nodes, DaemonSets: in.DaemonSets,
				Current: apply(in.Current, out), Online: in.Online})
			assert.Empty(t, again.Desired, "planning again over the result changes nothing")
		})
	}
}

func TestPlanRemovalMessages(t *testing.T) {
	in := Input{
		Now:        t0,
		Nodes:      []schema.Node{node("n1", gateway, dedicated)},
		DaemonSets: []DaemonSetState{compile(t, edgeAgent), compile(t, logs)},
		Current:    map[string]NodeDesired{"n1": desired(1, inst("edge-agent", "r1"), inst("logs", "r1"))},
	}
	out := Plan(in)
	require.Len(t, out.Unscheduled, 1)
	assert.Equal(t, Change{Node: "n1", DaemonSet: "default/edge-agent", Revision: "r1", Reason: "NodeSelectorMismatch",
		Message: `node selector: label "role" is "gateway", want "edge"; taint dedicated=ops:NoExecute is not tolerated`},
		out.Unscheduled[0])
	require.Len(t, out.Evicted, 1)
	assert.Equal(t, Change{Node: "n1", DaemonSet: "default/logs", Revision: "r1", Reason: "UntoleratedNoExecuteTaint",
		Message: "taint dedicated=ops:NoExecute is not tolerated"}, out.Evicted[0])
}

func TestPlanRevisionSeam(t *testing.T) {
	logsState := compile(t, dsSpec{name: "logs", revision: "r2"})
	cases := []struct {
		name            string
		revisions       RevisionFunc
		current         []schema.DesiredInstance
		want            *NodeDesired // nil: unchanged
		wantUpdated     []string
		wantUnscheduled []string
	}{
		{
			name:      "rollout keeps the old revision for now",
			revisions: func(_ string, have []schema.DesiredInstance) []string { return []string{have[0].Revision} },
			current:   []schema.DesiredInstance{inst("logs", "r1")},
		},
		{
			name:        "surge pair, returned unsorted and duplicated",
			revisions:   func(string, []schema.DesiredInstance) []string { return []string{"r2", "r1", "r2"} },
			current:     []schema.DesiredInstance{inst("logs", "r1")},
			want:        ptr(desired(2, inst("logs", "r1"), inst("logs", "r2"))),
			wantUpdated: []string{"n1 default/logs Updated"},
		},
		{
			name:            "withheld",
			revisions:       func(string, []schema.DesiredInstance) []string { return nil },
			current:         []schema.DesiredInstance{inst("logs", "r1")},
			want:            ptr(desired(2)),
			wantUnscheduled: []string{"n1 default/logs WithheldByRollout"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := logsState
			ds.Revisions = tc.revisions
			out := Plan(Input{
				Now:        t0,
				Nodes:      []schema.Node{node("n1", edge)},
				DaemonSets: []DaemonSetState{ds},
				Current:    map[string]NodeDesired{"n1": desired(1, tc.current...)},
			})
			if tc.want == nil {
				assert.Empty(t, out.Desired)
			} else {
				assert.Equal(t, map[string]NodeDesired{"n1": *tc.want}, out.Desired)
			}
			assert.Equal(t, tc.wantUpdated, keys(out.Updated))
			assert.Equal(t, tc.wantUnscheduled, keys(out.Unscheduled))
		})
	}
}

func TestPlanRevisionFuncSeesNodeAndHave(t *testing.T) {
	ds := compile(t, dsSpec{name: "logs", revision: "r2"})
	seen := map[string][]schema.DesiredInstance{}
	ds.Revisions = func(node string, have []schema.DesiredInstance) []string {
		seen[node] = append([]schema.DesiredInstance(nil), have...)
		return []string{"r2"}
	}
	Plan(Input{
		Now:        t0,
		Nodes:      []schema.Node{node("new", nil), node("old", nil)},
		DaemonSets: []DaemonSetState{ds, compile(t, edgeAgent)},
		Current:    map[string]NodeDesired{"old": desired(1, inst("edge-agent", "r1"), inst("logs", "r1"))},
	})
	assert.Equal(t, map[string][]schema.DesiredInstance{"new": nil, "old": {inst("logs", "r1")}}, seen)
}

func TestPlanRequeue(t *testing.T) {
	readySince := at(-5 * time.Second)
	cases := []struct {
		name          string
		nodesChangeAt time.Time
		minReady      int32
		want          time.Time
	}{
		{"nothing pending", time.Time{}, 0, time.Time{}},
		{"node grace expiry", at(time.Minute), 0, at(time.Minute)},
		{"node change in the past is ignored", at(-time.Minute), 0, time.Time{}},
		{"instance becomes available", at(time.Minute), 10, at(5 * time.Second)},
		{"earliest wins", at(time.Second), 10, at(time.Second)},
		{"already available", time.Time{}, 5, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Plan(Input{
				Now:           t0,
				Nodes:         []schema.Node{node("n1", edge)},
				NodesChangeAt: tc.nodesChangeAt,
				DaemonSets:    []DaemonSetState{compile(t, dsSpec{name: "logs", minReady: tc.minReady})},
				Current:       map[string]NodeDesired{"n1": desired(1, inst("logs", "r1"))},
				Observed: map[string]schema.ObservedState{"n1": {Node: "n1", Instances: []schema.InstanceStatus{
					{DaemonSet: "default/logs", Revision: "r1", Phase: schema.PhaseRunning, Ready: true, ReadySince: &readySince}}}},
				Online: map[string]bool{"n1": true},
			})
			assert.Equal(t, tc.want, out.RequeueAt)
		})
	}
}

func TestPlanPanicsWithoutPolicy(t *testing.T) {
	assert.PanicsWithValue(t, "reconcile: daemonset default/x has no placement policy", func() {
		Plan(Input{DaemonSets: []DaemonSetState{{Key: "default/x", CurrentRevision: "r1"}}})
	})
}

func TestPlanDoesNotModifyInput(t *testing.T) {
	current := map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"), inst("edge-agent", "r1"))}
	nodes := []schema.Node{node("n2", edge), node("n1", gateway)}
	ds := []DaemonSetState{compile(t, logs), compile(t, edgeAgent)}
	Plan(Input{Now: t0, Nodes: nodes, DaemonSets: ds, Current: current})
	assert.Equal(t, map[string]NodeDesired{"n1": desired(3, inst("logs", "r1"), inst("edge-agent", "r1"))}, current)
	assert.Equal(t, []string{"n2", "n1"}, []string{nodes[0].Name, nodes[1].Name})
	assert.Equal(t, []string{"default/logs", "default/edge-agent"}, []string{ds[0].Key, ds[1].Key})
}
