package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomEntriesState is a state whose maps hold random entries of up to
// 30 nodes, each map nil, empty or filled; its progress is made of two
// such maps, assigned and pending, one independent of the other.
func randomEntriesState(rng *rand.Rand) State {
	st := State{Target: "v2", Stable: "v1", Paused: rng.IntN(2) == 0, PauseReason: "why",
		CanaryAvailableSince: t0.Add(time.Duration(rng.IntN(10)) * time.Second)}
	nodes := rng.IntN(30)
	maybe := func() bool { return rng.IntN(3) == 0 }
	var assigned map[string]time.Time
	var pending map[string]string
	if !maybe() {
		assigned = map[string]time.Time{}
	}
	if !maybe() {
		st.Failed = map[string]string{}
	}
	if !maybe() {
		pending = map[string]string{}
	}
	if !maybe() {
		st.Away = map[string]bool{}
	}
	if !maybe() {
		st.StaleLocks = map[string]time.Time{}
	}
	if !maybe() {
		st.LockOverrides = map[string]time.Time{}
	}
	reasons := []string{"", "not yet available", "Failed: exit 1"}
	for k := range nodes {
		node := fmt.Sprintf("n%02d", k)
		if assigned != nil && maybe() {
			assigned[node] = t0.Add(time.Duration(rng.IntN(1e6)) * time.Millisecond)
		}
		if st.Failed != nil && maybe() {
			st.Failed[node] = reasons[rng.IntN(len(reasons))]
		}
		if pending != nil && maybe() {
			pending[node] = reasons[rng.IntN(len(reasons))]
		}
		if st.Away != nil && maybe() {
			st.Away[node] = true
		}
		if st.StaleLocks != nil && maybe() {
			st.StaleLocks[node] = t0.Add(-time.Duration(rng.IntN(1e6)) * time.Millisecond)
		}
		if st.LockOverrides != nil && maybe() {
			st.LockOverrides[node] = t0.Add(-time.Duration(rng.IntN(1e6)) * time.Millisecond)
		}
	}
	return withProgress(st, assigned, pending)
}

// TestPropertyEntriesRebuildState: a state's Head with every node's Entry
// set back, and with every entry through JSON, is the state (a nil map the
// same as an empty one).
func TestPropertyEntriesRebuildState(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, rand.Uint64(), rand.Uint64()}
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 0xe17))
		for round := range 200 {
			st := randomEntriesState(rng)
			where := fmt.Sprintf("seed %d round %d", seed, round)
			head := st.Head()
			require.False(t, head.HasEntries(), where)
			require.Equal(t, st.HasEntries(), len(st.EntryNodes()) > 0, where)
			rebuilt, decoded := head, head
			for _, node := range st.EntryNodes() {
				e, ok := st.Entry(node)
				require.True(t, ok, "%s: %s listed without an entry", where, node)
				rebuilt.SetEntry(node, e)
				raw, err := json.Marshal(e)
				require.NoError(t, err)
				var back NodeEntry
				require.NoError(t, json.Unmarshal(raw, &back), "%s: %s", where, raw)
				require.True(t, e.Equal(back), "%s: %s: %+v through JSON %s is %+v", where, node, e, raw, back)
				decoded.SetEntry(node, back)
			}
			for _, got := range []State{rebuilt, decoded} {
				require.True(t, scalarsEqual(st, got), where)
				require.True(t, maps.Equal(st.progress, got.progress), "%s: progress", where)
				require.True(t, maps.Equal(st.Failed, got.Failed), "%s: failed", where)
				require.True(t, maps.Equal(st.Away, got.Away), "%s: away", where)
				require.True(t, maps.EqualFunc(st.StaleLocks, got.StaleLocks, time.Time.Equal), "%s: staleLocks", where)
				require.True(t, maps.EqualFunc(st.LockOverrides, got.LockOverrides, time.Time.Equal), "%s: lockOverrides", where)
			}
		}
	}
}

func TestSetEntry(t *testing.T) {
	at := t0.Add(time.Second)
	cases := []struct {
		name  string
		st    State
		entry NodeEntry
		want  State
	}{
		{"into nil maps", State{}, NodeEntry{AssignedAt: at, HasPending: true, Pending: "p", Away: true},
			withProgress(State{Away: map[string]bool{"n": true}}, map[string]time.Time{"n": at}, map[string]string{"n": "p"})},
		{"an empty pending state is an entry", State{}, NodeEntry{HasPending: true},
			withProgress(State{}, nil, map[string]string{"n": ""})},
		{"an empty failure is an entry", State{}, NodeEntry{HasFailed: true},
			State{Failed: map[string]string{"n": ""}}},
		{"replaces and removes", withProgress(State{Failed: map[string]string{"n": "x"}},
			map[string]time.Time{"n": t0, "o": t0}, map[string]string{"n": "p"}),
			NodeEntry{AssignedAt: at},
			withProgress(State{Failed: map[string]string{}}, map[string]time.Time{"n": at, "o": t0}, nil)},
		{"zero removes from every map", withProgress(State{Failed: map[string]string{"n": "x"},
			Away: map[string]bool{"n": true, "o": true}, StaleLocks: map[string]time.Time{"n": t0},
			LockOverrides: map[string]time.Time{"n": t0}}, map[string]time.Time{"n": t0}, map[string]string{"n": ""}),
			NodeEntry{}, State{Away: map[string]bool{"o": true}}},
		{"a lock's entries alone", State{}, NodeEntry{StaleLock: t0, LockOverride: t0},
			State{StaleLocks: map[string]time.Time{"n": t0}, LockOverrides: map[string]time.Time{"n": t0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.SetEntry("n", tc.entry)
			assert.Equal(t, normalState(tc.want), normalState(tc.st))
			e, ok := tc.st.Entry("n")
			assert.Equal(t, !tc.entry.IsZero(), ok)
			assert.True(t, tc.entry.Equal(e), "entry %+v, want %+v", e, tc.entry)
		})
	}
}

func TestChangedEntries(t *testing.T) {
	before := withProgress(State{}, map[string]time.Time{"a": t0, "b": t0, "c": t0}, map[string]string{"b": "p"})
	after := cloneState(before)
	after.SetEntry("b", NodeEntry{AssignedAt: t0})               // pending cleared
	after.SetEntry("d", NodeEntry{HasFailed: true, Failed: "x"}) // new
	changed, all := changedEntries(before, after)
	assert.False(t, all)
	assert.Equal(t, []string{"b", "d"}, changed)

	_, all = changedEntries(before, before.Retarget("v9"))
	assert.True(t, all, "every entry dropped: a whole write is the smaller")
}
