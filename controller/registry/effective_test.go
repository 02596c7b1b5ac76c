package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

var (
	t0    = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	grace = 40 * time.Second
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

func cond(typ, status string, since time.Time) schema.NodeCondition {
	return schema.NodeCondition{Type: typ, Status: status, Since: since, Reason: "Agent"}
}

func taint(key, effect string, added *time.Time) schema.Taint {
	return schema.Taint{Key: key, Effect: effect, TimeAdded: added}
}

// healthy returns the input of an online node that announced the given
// conditions (Ready True if none).
func healthy(conds ...schema.NodeCondition) NodeInput {
	if len(conds) == 0 {
		conds = []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionTrue, t0)}
	}
	return NodeInput{
		Name: "n1",
		Status: &schema.NodeStatus{
			Node:       "n1",
			Labels:     map[string]string{"site": "a", "zone": "z1"},
			Taints:     []schema.Taint{taint("dedicated", schema.TaintNoSchedule, nil)},
			Conditions: conds,
			Info:       schema.NodeInfo{Arch: "arm64"},
		},
		Presence: Presence{Known: true, Online: true, Session: 1, Since: t0},
	}
}

func offline(in NodeInput, since time.Time) NodeInput {
	in.Presence = Presence{Known: true, Online: false, Session: 1, Since: since}
	return in
}

func TestEffectiveLifecycle(t *testing.T) {
	readySince := at(-time.Hour)
	dedicated := taint("dedicated", schema.TaintNoSchedule, nil)
	cases := []struct {
		name      string
		in        NodeInput
		now       time.Time
		wantTaint []schema.Taint
		wantConds []schema.NodeCondition
		wantNext  time.Time
	}{
		{
			name:      "online healthy node keeps what it announced",
			in:        healthy(cond(schema.NodeReady, schema.ConditionTrue, readySince)),
			now:       at(time.Hour),
			wantTaint: []schema.Taint{dedicated},
			wantConds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionTrue, readySince)},
		},
		{
			name:      "offline within grace keeps conditions and reports grace expiry",
			in:        offline(healthy(cond(schema.NodeReady, schema.ConditionTrue, readySince)), at(0)),
			now:       at(grace - time.Second),
			wantTaint: []schema.Taint{dedicated},
			wantConds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionTrue, readySince)},
			wantNext:  at(grace),
		},
		{
			name: "offline at grace expiry is unknown and unreachable",
			in:   offline(healthy(cond(schema.NodeReady, schema.ConditionTrue, readySince)), at(0)),
			now:  at(grace),
			wantTaint: []schema.Taint{dedicated,
				taint(schema.TaintNodeUnreachable, schema.TaintNoExecute, ptr(at(grace)))},
			wantConds: []schema.NodeCondition{unknown(schema.NodeReady, at(0))},
		},
		{
			name: "offline past grace turns every condition unknown, dropping pressure taints",
			in: offline(healthy(
				cond(schema.NodeDiskPressure, schema.ConditionTrue, readySince),
				cond(schema.NodeReady, schema.ConditionTrue, readySince),
			), at(0)),
			now: at(time.Hour),
			wantTaint: []schema.Taint{dedicated,
				taint(schema.TaintNodeUnreachable, schema.TaintNoExecute, ptr(at(grace)))},
			wantConds: []schema.NodeCondition{
				unknown(schema.NodeDiskPressure, at(0)),
				unknown(schema.NodeReady, at(0)),
			},
		},
		{
			name: "offline past grace without announced Ready gets Ready Unknown",
			in:   offline(healthy(cond(schema.NodeMemoryPressure, schema.ConditionFalse, readySince)), at(0)),
			now:  at(time.Hour),
			wantTaint: []schema.Taint{dedicated,
				taint(schema.TaintNodeUnreachable, schema.TaintNoExecute, ptr(at(grace)))},
			wantConds: []schema.NodeCondition{
				unknown(schema.NodeMemoryPressure, at(0)),
				unknown(schema.NodeReady, at(0)),
			},
		},
		{
			name: "never seen online with zero since is past grace",
			in:   NodeInput{Name: "n1", Status: &schema.NodeStatus{Node: "n1"}},
			now:  at(0),
			wantTaint: []schema.Taint{
				taint(schema.TaintNodeUnreachable, schema.TaintNoExecute, ptr(time.Time{}.Add(grace)))},
			wantConds: []schema.NodeCondition{unknown(schema.NodeReady, time.Time{})},
		},
		{
			name: "node back online loses unreachable and keeps announced conditions",
			in: func() NodeInput {
				in := healthy(cond(schema.NodeReady, schema.ConditionTrue, readySince))
				in.Status.Taints = append(in.Status.Taints,
					taint(schema.TaintNodeUnreachable, schema.TaintNoExecute, ptr(at(0))))
				in.Presence = Presence{Known: true, Online: true, Session: 2, Since: at(time.Hour)}
				return in
			}(),
			now:       at(time.Hour),
			wantTaint: []schema.Taint{dedicated},
			wantConds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionTrue, readySince)},
		},
		{
			name: "announced Ready Unknown while online taints unreachable from its since",
			in:   healthy(cond(schema.NodeReady, schema.ConditionUnknown, readySince)),
			now:  at(0),
			wantTaint: []schema.Taint{dedicated,
				taint(schema.TaintNodeUnreachable, schema.TaintNoExecute, ptr(readySince))},
			wantConds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionUnknown, readySince)},
		},
		{
			name:      "condition without since gives a taint without time",
			in:        healthy(cond(schema.NodeReady, schema.ConditionFalse, time.Time{})),
			now:       at(0),
			wantTaint: []schema.Taint{dedicated, taint(schema.TaintNodeNotReady, schema.TaintNoExecute, nil)},
			wantConds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionFalse, time.Time{})},
		},
		{
			name: "offline within grace keeps condition taints",
			in:   offline(healthy(cond(schema.NodeReady, schema.ConditionFalse, readySince)), at(0)),
			now:  at(time.Second),
			wantTaint: []schema.Taint{dedicated,
				taint(schema.TaintNodeNotReady, schema.TaintNoExecute, ptr(readySince))},
			wantConds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionFalse, readySince)},
			wantNext:  at(grace),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, next := Effective(tc.in, tc.now, grace)
			assert.Equal(t, tc.wantTaint, n.Taints)
			assert.Equal(t, tc.wantConds, n.Conditions)
			assert.Equal(t, tc.wantNext, next)
			assert.Equal(t, tc.in.Name, n.Name)
		})
	}
}

func unknown(typ string, since time.Time) schema.NodeCondition {
	return schema.NodeCondition{Type: typ, Status: schema.ConditionUnknown, Since: since,
		Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown}
}

func TestEffectiveConditionTaints(t *testing.T) {
	since := at(-time.Minute)
	cases := []struct {
		condition, status string
		want              *schema.Taint // nil: no taint
	}{
		{schema.NodeReady, schema.ConditionTrue, nil},
		{schema.NodeReady, schema.ConditionFalse, ptr(taint(schema.TaintNodeNotReady, schema.TaintNoExecute, &since))},
		{schema.NodeDiskPressure, schema.ConditionTrue, ptr(taint(schema.TaintNodeDiskPressure, schema.TaintNoSchedule, &since))},
		{schema.NodeDiskPressure, schema.ConditionFalse, nil},
		{schema.NodeMemoryPressure, schema.ConditionTrue, ptr(taint(schema.TaintNodeMemoryPressure, schema.TaintNoSchedule, &since))},
		{schema.NodeMemoryPressure, schema.ConditionUnknown, nil},
		{schema.NodePIDPressure, schema.ConditionTrue, ptr(taint(schema.TaintNodePIDPressure, schema.TaintNoSchedule, &since))},
		{schema.NodeNetworkUnavailable, schema.ConditionTrue, ptr(taint(schema.TaintNodeNetworkUnavailable, schema.TaintNoSchedule, &since))},
		{schema.NodeNetworkUnavailable, schema.ConditionFalse, nil},
	}
	for _, tc := range cases {
		t.Run(tc.condition+"="+tc.status, func(t *testing.T) {
			in := healthy(cond(tc.condition, tc.status, since))
			in.Status.Taints = nil
			n, next := Effective(in, at(0), grace)
			assert.True(t, next.IsZero())
			if tc.want == nil {
				assert.Empty(t, n.Taints)
				return
			}
			assert.Equal(t, []schema.Taint{*tc.want}, n.Taints)
		})
	}
}

func TestEffectiveOverrides(t *testing.T) {
	since := at(-time.Minute)
	cases := []struct {
		name       string
		conds      []schema.NodeCondition
		overrides  Overrides
		wantLabels map[string]string
		wantTaints []schema.Taint
		wantCordon bool
	}{
		{
			name:       "no overrides",
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
			wantTaints: []schema.Taint{taint("dedicated", schema.TaintNoSchedule, nil)},
		},
		{
			name: "labels set, replaced and removed",
			overrides: Overrides{Labels: map[string]*string{
				"site": ptr("b"), "zone": nil, "tier": ptr("gold"), "absent": nil,
			}},
			wantLabels: map[string]string{"site": "b", "tier": "gold"},
			wantTaints: []schema.Taint{taint("dedicated", schema.TaintNoSchedule, nil)},
		},
		{
			name: "taint replaced by key and effect, another effect added",
			overrides: Overrides{Taints: []schema.Taint{
				{Key: "dedicated", Value: "ops", Effect: schema.TaintNoSchedule},
				{Key: "dedicated", Effect: schema.TaintNoExecute},
			}},
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
			wantTaints: []schema.Taint{
				{Key: "dedicated", Value: "ops", Effect: schema.TaintNoSchedule},
				{Key: "dedicated", Effect: schema.TaintNoExecute},
			},
		},
		{
			name:       "announced taint removed; other effect untouched",
			overrides:  Overrides{RemovedTaints: []string{"dedicated:NoSchedule", "dedicated:NoExecute", "malformed"}},
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
		},
		{
			name:       "removal does not apply to the operator's own taints",
			overrides:  Overrides{RemovedTaints: []string{"x:NoExecute"}, Taints: []schema.Taint{taint("x", schema.TaintNoExecute, nil)}},
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
			wantTaints: []schema.Taint{
				taint("dedicated", schema.TaintNoSchedule, nil),
				taint("x", schema.TaintNoExecute, nil),
			},
		},
		{
			name:       "cordon",
			overrides:  Overrides{Unschedulable: ptr(true)},
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
			wantTaints: []schema.Taint{taint("dedicated", schema.TaintNoSchedule, nil)},
			wantCordon: true,
		},
		{
			name:       "lifecycle taints cannot be removed by the operator",
			conds:      []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionFalse, since)},
			overrides:  Overrides{RemovedTaints: []string{schema.TaintNodeNotReady + ":" + schema.TaintNoExecute}},
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
			wantTaints: []schema.Taint{
				taint("dedicated", schema.TaintNoSchedule, nil),
				taint(schema.TaintNodeNotReady, schema.TaintNoExecute, &since),
			},
		},
		{
			name:  "operator lifecycle taint wins over the derived one",
			conds: []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionFalse, since)},
			overrides: Overrides{Taints: []schema.Taint{
				taint(schema.TaintNodeNotReady, schema.TaintNoExecute, ptr(at(-time.Hour)))}},
			wantLabels: map[string]string{"site": "a", "zone": "z1"},
			wantTaints: []schema.Taint{
				taint("dedicated", schema.TaintNoSchedule, nil),
				taint(schema.TaintNodeNotReady, schema.TaintNoExecute, ptr(at(-time.Hour))),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := healthy(tc.conds...)
			in.Overrides = tc.overrides
			n, _ := Effective(in, at(0), grace)
			assert.Equal(t, tc.wantLabels, n.Labels)
			assert.Equal(t, tc.wantTaints, n.Taints)
			assert.Equal(t, tc.wantCordon, n.Unschedulable)
		})
	}
}

func TestEffectiveUncordonOverride(t *testing.T) {
	in := healthy()
	in.Overrides.Unschedulable = ptr(false)
	n, _ := Effective(in, at(0), grace)
	assert.False(t, n.Unschedulable)
}

func TestEffectiveWithoutStatus(t *testing.T) {
	in := NodeInput{Name: "n1", Presence: Presence{Known: true, Online: true, Since: t0},
		Overrides: Overrides{Labels: map[string]*string{"site": ptr("a")}}}
	n, next := Effective(in, at(0), grace)
	assert.Equal(t, schema.Node{Name: "n1", Labels: map[string]string{"site": "a"}}, n)
	assert.True(t, next.IsZero())
}

func TestEffectiveDoesNotAliasInput(t *testing.T) {
	added := at(0)
	in := healthy(cond(schema.NodeReady, schema.ConditionTrue, t0))
	in.Status.Taints[0].TimeAdded = &added
	in.Status.Capacity = schema.ResourceList{"cpu": "4"}
	n, _ := Effective(in, at(0), grace)

	n.Labels["site"] = "changed"
	n.Taints[0].Key = "changed"
	*n.Taints[0].TimeAdded = at(time.Hour)
	n.Conditions[0].Status = schema.ConditionFalse
	n.Capacity["cpu"] = "1"

	require.Equal(t, "a", in.Status.Labels["site"])
	require.Equal(t, "dedicated", in.Status.Taints[0].Key)
	require.Equal(t, at(0), *in.Status.Taints[0].TimeAdded)
	require.Equal(t, schema.ConditionTrue, in.Status.Conditions[0].Status)
	require.Equal(t, schema.Quantity("4"), in.Status.Capacity["cpu"])
}

// TestSharedEffectiveEqualsEffective: the Registry's cache (effective with
// shared) holds what Effective returns, whatever the overrides and the
// presence, and leaves the input as it was.
func TestSharedEffectiveEqualsEffective(t *testing.T) {
	offline := func(in NodeInput) NodeInput { in.Presence.Online = false; return in }
	cases := []struct {
		name string
		in   NodeInput
		now  time.Time
	}{
		{"online", healthy(), at(0)},
		{"offline within grace", offline(healthy()), at(grace / 2)},
		{"unreachable", offline(healthy()), at(2 * grace)},
		{"label overrides", func() NodeInput {
			in := healthy()
			in.Overrides.Labels = map[string]*string{"site": ptr("b"), "zone": nil}
			return in
		}(), at(0)},
		{"no labels, conditions or addresses", func() NodeInput {
			in := healthy()
			in.Status.Labels, in.Status.Conditions = nil, []schema.NodeCondition{}
			in.Status.Addresses = []schema.NodeAddress{}
			return in
		}(), at(0)},
		{"capacity and addresses", func() NodeInput {
			in := healthy()
			in.Status.Capacity = schema.ResourceList{"cpu": "4"}
			in.Status.Addresses = []schema.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}}
			return in
		}(), at(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := cloneInput(tc.in)
			want, wantNext := Effective(tc.in, tc.now, grace)
			got, next := effective(tc.in, tc.now, grace, true)
			require.Equal(t, want, got)
			require.Equal(t, wantNext, next)
			require.Equal(t, before, tc.in)
		})
	}
}
