package registry

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func status(node string, labels map[string]string) schema.NodeStatus {
	return schema.NodeStatus{
		SchemaVersion: schema.WireVersion,
		Node:          node,
		Labels:        labels,
		Conditions:    []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionTrue, t0)},
	}
}

func presence(node string, online bool, session int64) schema.Presence {
	return schema.Presence{SchemaVersion: schema.WireVersion, Node: node, Online: online, Session: session}
}

func TestApplyPresenceOrdersSessions(t *testing.T) {
	type step struct {
		name        string
		p           schema.Presence
		wantChanged bool
		wantOnline  bool
		wantSession int64
		wantSince   time.Time // Presence.Since after the step
	}
	// Each step happens one minute after the previous one.
	steps := []step{
		{"first online", presence("n1", true, 10), true, true, 10, at(1 * time.Minute)},
		{"duplicate online", presence("n1", true, 10), false, true, 10, at(1 * time.Minute)},
		{"will of the current session", presence("n1", false, 10), true, false, 10, at(3 * time.Minute)},
		{"stale online of the ended session", presence("n1", true, 10), false, false, 10, at(3 * time.Minute)},
		{"reconnect", presence("n1", true, 20), true, true, 20, at(5 * time.Minute)},
		{"late will of the old session", presence("n1", false, 10), false, true, 20, at(5 * time.Minute)},
		{"new session numbered lower (device clock behind)", presence("n1", true, 5), false, true, 5, at(5 * time.Minute)},
		{"new session without a will seen", presence("n1", true, 30), false, true, 30, at(5 * time.Minute)},
		{"will of a newer session whose online was missed", presence("n1", false, 40), true, false, 40, at(9 * time.Minute)},
		{"older will after that", presence("n1", false, 30), false, false, 40, at(9 * time.Minute)},
	}
	r := New()
	for i, s := range steps {
		now := at(time.Duration(i+1) * time.Minute)
		changed := r.ApplyPresence(s.p, now)
		in, ok := r.Input("n1")
		require.True(t, ok)
		assert.Equal(t, s.wantChanged, changed, "step %q: changed", s.name)
		assert.Equal(t, s.wantOnline, in.Presence.Online, "step %q: online", s.name)
		assert.Equal(t, s.wantSession, in.Presence.Session, "step %q: session", s.name)
		assert.Equal(t, s.wantSince, in.Presence.Since, "step %q: since", s.name)
	}
}

// TestApplyPresenceUnannouncedWill: the will of a session never seen
// online (a connection that died before announcing itself, whose will a
// broker cluster delivers late) marks the node offline, but the online
// session it seemed to replace is not over: the agent's second
// announcement of that session brings the node back, and its will, when
// that connection ends, is final. A new session retires both.
func TestApplyPresenceUnannouncedWill(t *testing.T) {
	steps := []struct {
		name        string
		p           schema.Presence
		wantChanged bool
		wantOnline  bool
		wantSession int64
	}{
		{"online", presence("n1", true, 10), true, true, 10},
		{"late will of an unannounced session", presence("n1", false, 7), true, false, 7},
		{"another unannounced will", presence("n1", false, 8), false, false, 8},
		{"online again of the session they displaced", presence("n1", true, 10), true, true, 10},
		{"the unannounced will once more", presence("n1", false, 7), false, true, 10},
		{"will of the current session", presence("n1", false, 10), true, false, 10},
		{"reconnect", presence("n1", true, 20), true, true, 20},
		{"unannounced will", presence("n1", false, 9), true, false, 9},
		{"will of the displaced session", presence("n1", false, 20), false, false, 9},
		{"its online after that", presence("n1", true, 20), false, false, 9},
		{"reconnect once more", presence("n1", true, 30), true, true, 30},
		{"unannounced will", presence("n1", false, 11), true, false, 11},
		{"new session", presence("n1", true, 40), true, true, 40},
		{"online of the session displaced before it", presence("n1", true, 30), false, true, 40},
	}
	r := New()
	for i, s := range steps {
		changed := r.ApplyPresence(s.p, at(time.Duration(i+1)*time.Minute))
		in, ok := r.Input("n1")
		require.True(t, ok)
		assert.Equal(t, s.wantChanged, changed, "step %q: changed", s.name)
		assert.Equal(t, s.wantOnline, in.Presence.Online, "step %q: online", s.name)
		assert.Equal(t, s.wantSession, in.Presence.Session, "step %q: session", s.name)
	}
}

// TestApplyPresenceIgnoresDeviceClock: a session number is the agent's
// connect time on its own clock, which a gateway without an RTC resets
// on every boot. The order is the order in which the controller receives
// presence: a session it has not seen is the newest, one it has seen and
// left is over.
func TestApplyPresenceIgnoresDeviceClock(t *testing.T) {
	steps := []struct {
		name       string
		p          schema.Presence
		wantOnline bool
	}{
		{"online, clock set", presence("n1", true, 1_700_000_000_000_000_000), true},
		{"will after a reboot", presence("n1", false, 1_700_000_000_000_000_000), false},
		{"reconnect with the clock back at 1970", presence("n1", true, 12_000_000_000), true},
		{"reboot again, the broker takes the half-open session over", presence("n1", true, 9_000_000_000), true},
		{"late will of the taken-over session", presence("n1", false, 12_000_000_000), true},
		{"very late will of the first session", presence("n1", false, 1_700_000_000_000_000_000), true},
		{"will of the current session", presence("n1", false, 9_000_000_000), false},
	}
	r := New()
	for i, s := range steps {
		r.ApplyPresence(s.p, at(time.Duration(i+1)*time.Minute))
		st, ok := r.State("n1")
		require.True(t, ok)
		assert.Equal(t, s.wantOnline, st.Online, "step %q", s.name)
	}
}

// TestApplyPresenceRemembersBoundedSessions: the sessions a node has left
// are kept, for late wills, up to a bound.
func TestApplyPresenceRemembersBoundedSessions(t *testing.T) {
	r := New()
	for s := int64(1); s <= 1000; s++ {
		r.ApplyPresence(presence("n1", true, s), at(time.Duration(s)*time.Second))
	}
	r.mu.Lock()
	kept := len(r.nodes["n1"].pastSessions)
	r.mu.Unlock()
	assert.LessOrEqual(t, kept, maxPastSessions)
	r.ApplyPresence(presence("n1", false, 999), at(time.Hour))
	st, _ := r.State("n1")
	assert.True(t, st.Online, "a late will of a recent session is ignored")
}

func TestApplyPresenceFirstOfflineStartsGrace(t *testing.T) {
	r := New()
	r.ApplyStatus(status("n1", nil), at(0))
	assert.True(t, r.ApplyPresence(presence("n1", false, 1), at(time.Minute)))
	nodes, next := r.Snapshot(at(time.Minute), grace)
	require.Len(t, nodes, 1)
	assert.Equal(t, at(time.Minute+grace), next)
}

func TestSnapshotLifecycle(t *testing.T) {
	r := New()
	r.ApplyStatus(status("b", map[string]string{"site": "x"}), at(0))
	r.ApplyPresence(presence("b", true, 1), at(0))
	r.ApplyStatus(status("a", nil), at(0))
	r.ApplyPresence(presence("a", true, 1), at(0))
	r.ApplyPresence(presence("presence-only", true, 1), at(0))
	r.SetOverrides("overrides-only", Overrides{Unschedulable: ptr(true)}, at(0))

	unreachable := func(n schema.Node) bool {
		for _, tt := range n.Taints {
			if tt.Key == schema.TaintNodeUnreachable {
				return true
			}
		}
		return false
	}
	cases := []struct {
		name            string
		act             func()
		now             time.Time
		wantUnreachable map[string]bool
		wantNext        time.Time
	}{
		{"registered nodes only, sorted", func() {}, at(time.Minute),
			map[string]bool{"a": false, "b": false}, time.Time{}},
		{"b disconnects", func() { r.ApplyPresence(presence("b", false, 1), at(2*time.Minute)) }, at(2 * time.Minute),
			map[string]bool{"a": false, "b": false}, at(2*time.Minute + grace)},
		{"just before grace expiry", func() {}, at(2*time.Minute + grace - time.Nanosecond),
			map[string]bool{"a": false, "b": false}, at(2*time.Minute + grace)},
		{"grace expired", func() {}, at(2*time.Minute + grace),
			map[string]bool{"a": false, "b": true}, time.Time{}},
		{"late will of an old session changes nothing", func() {
			r.ApplyPresence(presence("a", true, 2), at(time.Hour)) // a reconnects; the broker has yet to send session 1's will
			r.ApplyPresence(presence("a", false, 1), at(time.Hour))
		}, at(time.Hour),
			map[string]bool{"a": false, "b": true}, time.Time{}},
		{"b returns and loses the taint", func() { r.ApplyPresence(presence("b", true, 2), at(2*time.Hour)) }, at(2 * time.Hour),
			map[string]bool{"a": false, "b": false}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.act()
			nodes, next := r.Snapshot(tc.now, grace)
			got := map[string]bool{}
			var names []string
			for _, n := range nodes {
				got[n.Name] = unreachable(n)
				names = append(names, n.Name)
			}
			assert.Equal(t, []string{"a", "b"}, names)
			assert.Equal(t, tc.wantUnreachable, got)
			assert.Equal(t, tc.wantNext, next)
		})
	}
}

func TestStatusOnlyNodeIsOfflineSinceFirstSeen(t *testing.T) {
	r := New()
	r.ApplyStatus(status("n1", nil), at(0))
	_, next := r.Snapshot(at(time.Second), grace)
	assert.Equal(t, at(grace), next)
	nodes, _ := r.Snapshot(at(grace), grace)
	require.Len(t, nodes, 1)
	assert.Equal(t, schema.ConditionUnknown, nodes[0].Condition(schema.NodeReady).Status)
}

func TestOverridesApplyOnceRegistered(t *testing.T) {
	r := New()
	r.SetOverrides("n1", Overrides{Labels: map[string]*string{"site": ptr("hq")}}, at(0))
	nodes, _ := r.Snapshot(at(0), grace)
	assert.Empty(t, nodes, "a node is not scheduled on before it announces itself")

	r.ApplyStatus(status("n1", map[string]string{"site": "edge", "os": "linux"}), at(time.Second))
	r.ApplyPresence(presence("n1", true, 1), at(time.Second))
	nodes, _ = r.Snapshot(at(time.Second), grace)
	require.Len(t, nodes, 1)
	assert.Equal(t, map[string]string{"site": "hq", "os": "linux"}, nodes[0].Labels)

	r.SetOverrides("n1", Overrides{}, at(time.Minute))
	nodes, _ = r.Snapshot(at(time.Minute), grace)
	assert.Equal(t, map[string]string{"site": "edge", "os": "linux"}, nodes[0].Labels)
}

func TestApplyStatusReportsChange(t *testing.T) {
	r := New()
	s := status("n1", map[string]string{"site": "a"})
	assert.True(t, r.ApplyStatus(s, at(0)), "first status")
	assert.False(t, r.ApplyStatus(status("n1", map[string]string{"site": "a"}), at(time.Second)), "same status")

	s.Labels["site"] = "mutated by caller"
	in, _ := r.Input("n1")
	assert.Equal(t, "a", in.Status.Labels["site"], "registry keeps its own copy")

	assert.True(t, r.ApplyStatus(status("n1", map[string]string{"site": "b"}), at(2*time.Second)), "changed status")
}

func TestStatesAndDelete(t *testing.T) {
	r := New()
	r.ApplyStatus(status("on", nil), at(0))
	r.ApplyPresence(presence("on", true, 1), at(time.Second))
	r.ApplyStatus(status("off", nil), at(0))
	r.ApplyPresence(presence("off", true, 1), at(time.Second))
	r.ApplyPresence(presence("off", false, 1), at(time.Minute))
	r.SetOverrides("pending", Overrides{Unschedulable: ptr(true)}, at(time.Hour))

	want := []NodeState{
		{Name: "off", Registered: true, Online: false, Session: 1, LastSeen: at(time.Minute), OfflineSince: at(time.Minute)},
		{Name: "on", Registered: true, Online: true, Session: 1, LastSeen: at(time.Second)},
		{Name: "pending", OfflineSince: at(time.Hour)},
	}
	assert.Equal(t, want, r.States())
	up, known := r.Counts()
	assert.Equal(t, 1, up)
	assert.Equal(t, 3, known)
	s, ok := r.State("on")
	require.True(t, ok)
	assert.Equal(t, want[1], s)

	assert.True(t, r.Delete("off"))
	assert.False(t, r.Delete("off"))
	_, ok = r.State("off")
	assert.False(t, ok)
	nodes, _ := r.Snapshot(at(time.Hour), grace)
	require.Len(t, nodes, 1)
	assert.Equal(t, "on", nodes[0].Name)
}

func TestPutAndInputCopy(t *testing.T) {
	r := New()
	in := offline(healthy(), at(0))
	in.Overrides = Overrides{
		Labels:        map[string]*string{"site": ptr("b")},
		Taints:        []schema.Taint{taint("x", schema.TaintNoExecute, ptr(at(0)))},
		Unschedulable: ptr(true),
	}
	r.Put(in, at(-time.Second))

	got, ok := r.Input("n1")
	require.True(t, ok)
	assert.Equal(t, in, got)

	*got.Overrides.Labels["site"] = "mutated"
	*got.Overrides.Taints[0].TimeAdded = at(time.Hour)
	*got.Overrides.Unschedulable = false
	got.Status.Labels["site"] = "mutated"
	again, _ := r.Input("n1")
	assert.Equal(t, in, again)

	s, _ := r.State("n1")
	assert.Equal(t, at(-time.Second), s.LastSeen)
	assert.Equal(t, at(0), s.OfflineSince)
}

func TestConcurrentUse(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				now := at(time.Duration(j) * time.Second)
				r.ApplyStatus(status("n1", map[string]string{"w": string(rune('a' + i))}), now)
				r.ApplyPresence(presence("n1", j%2 == 0, int64(j)), now)
				r.Snapshot(now, grace)
				r.States()
			}
		})
	}
	wg.Wait()
	nodes, _ := r.Snapshot(at(time.Hour), grace)
	assert.Len(t, nodes, 1)
}

func TestSnapshotCacheFollowsTimeAndGrace(t *testing.T) {
	r := New()
	r.ApplyStatus(status("n1", nil), at(0))
	r.ApplyPresence(presence("n1", false, 1), at(0))
	ready := func(now time.Time, g time.Duration) string {
		nodes, _ := r.Snapshot(now, g)
		require.Len(t, nodes, 1)
		return nodes[0].Condition(schema.NodeReady).Status
	}
	steps := []struct {
		name  string
		now   time.Time
		grace time.Duration
		want  string
	}{
		{"within grace", at(time.Second), grace, schema.ConditionTrue},
		{"expired", at(grace), grace, schema.ConditionUnknown},
		{"still expired, from the cache", at(time.Hour), grace, schema.ConditionUnknown},
		{"clock set back before the expiry", at(time.Second), grace, schema.ConditionTrue},
		{"longer grace", at(time.Hour), 2 * time.Hour, schema.ConditionTrue},
		{"shorter grace again", at(time.Hour), grace, schema.ConditionUnknown},
	}
	for _, s := range steps {
		assert.Equal(t, s.want, ready(s.now, s.grace), s.name)
	}
}

// TestConditionSinceIsTheControllerClock: a condition's Since is when the
// controller first received it in its status, not the device's clock: a
// NotReady since 1970 (a gateway without an RTC) would start every
// tolerationSeconds of the not-ready taint already expired, and evict at
// once; a Since in the future would never evict.
func TestConditionSinceIsTheControllerClock(t *testing.T) {
	r := New()
	epoch := time.Unix(15, 0)
	notReady := func(since time.Time) schema.NodeStatus {
		st := status("n1", nil)
		st.Conditions = []schema.NodeCondition{cond(schema.NodeReady, schema.ConditionFalse, since)}
		return st
	}
	taintAdded := func(now time.Time) time.Time {
		nodes, _ := r.Snapshot(now, grace)
		require.Len(t, nodes, 1)
		for _, tt := range nodes[0].Taints {
			if tt.Key == schema.TaintNodeNotReady {
				require.NotNil(t, tt.TimeAdded)
				return *tt.TimeAdded
			}
		}
		t.Fatalf("no %s taint in %+v", schema.TaintNodeNotReady, nodes[0].Taints)
		return time.Time{}
	}
	r.ApplyPresence(presence("n1", true, 1), at(0))
	assert.True(t, r.ApplyStatus(notReady(epoch), at(time.Minute)))
	assert.Equal(t, at(time.Minute), taintAdded(at(time.Minute)), "since the controller received it")

	assert.False(t, r.ApplyStatus(notReady(epoch.Add(time.Hour)), at(2*time.Minute)), "the same condition again changes nothing")
	assert.Equal(t, at(time.Minute), taintAdded(at(2*time.Minute)), "kept while the status is unchanged")

	r.ApplyStatus(status("n1", nil), at(3*time.Minute)) // Ready again
	assert.True(t, r.ApplyStatus(notReady(at(24*time.Hour)), at(4*time.Minute)))
	assert.Equal(t, at(4*time.Minute), taintAdded(at(4*time.Minute)), "a device clock ahead does not postpone it")
}

// TestModelIsSharedAndReplaced: Model hands out the cached model itself
// while the node's input does not change, and a new one when it does,
// leaving the one handed out as it was.
func TestModelIsSharedAndReplaced(t *testing.T) {
	r := New()
	r.ApplyStatus(status("n1", map[string]string{"site": "a"}), at(0))
	r.ApplyPresence(presence("n1", true, 1), at(0))
	first, _, ok := r.Model("n1", at(time.Second), grace)
	require.True(t, ok)
	again, _, _ := r.Model("n1", at(2*time.Second), grace)
	assert.Same(t, first, again)
	node, _, _ := r.Node("n1", at(2*time.Second), grace)
	assert.Equal(t, *first, node)

	r.ApplyStatus(status("n1", map[string]string{"site": "b"}), at(3*time.Second))
	next, _, _ := r.Model("n1", at(4*time.Second), grace)
	assert.Equal(t, "b", next.Labels["site"])
	assert.Equal(t, "a", first.Labels["site"], "a model handed out is never modified")

	_, _, ok = r.Model("unknown", at(0), grace)
	assert.False(t, ok)
}
