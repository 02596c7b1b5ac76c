package rollout

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withProgress returns st with the progress the two maps a State held
// before it did record: the nodes of assigned assigned then, those of
// pending pending with their messages.
func withProgress(st State, assigned map[string]time.Time, pending map[string]string) State {
	j := st.toJSON()
	j.AssignedAt, j.Pending = assigned, pending
	return j.state()
}

// oldRecord is a whole rollout record as the State of 2f951ea (with its
// AssignedAt and Pending maps) encoded it, every field set.
const oldRecord = `{"target":"v2","stable":"v1","previous":"v0",` +
	`"assignedAt":{"a":"2026-01-01T00:00:00Z","b":"2026-01-01T00:00:01.5Z","c":"2026-01-01T00:00:02.000000001Z"},` +
	`"failed":{"c":"Failed: exit 1"},"pending":{"a":"not yet available","b":"","d":"CrashLoopBackOff: back-off"},` +
	`"away":{"b":true},"paused":true,"pauseReason":"why","operatorPaused":true,"rolledBackFrom":"v3",` +
	`"rollbackReason":"because","canaryPromoted":true,"canaryAvailableSince":"2026-01-01T00:00:03Z","complete":true,` +
	`"staleLocks":{"e":"2025-12-31T23:00:00Z"},"lockOverrides":{"e":"2025-12-31T23:00:00Z"}}`

func TestStateJSONReadsAndWritesOldRecords(t *testing.T) {
	want := withProgress(State{Target: "v2", Stable: "v1", Previous: "v0",
		Failed: map[string]string{"c": "Failed: exit 1"}, Away: map[string]bool{"b": true},
		Paused: true, PauseReason: "why", OperatorPaused: true, RolledBackFrom: "v3", RollbackReason: "because",
		CanaryPromoted: true, CanaryAvailableSince: t0.Add(3 * time.Second), Complete: true,
		StaleLocks:    map[string]time.Time{"e": t0.Add(-time.Hour)},
		LockOverrides: map[string]time.Time{"e": t0.Add(-time.Hour)}},
		map[string]time.Time{"a": t0, "b": t0.Add(1500 * time.Millisecond), "c": t0.Add(2*time.Second + 1)},
		map[string]string{"a": "not yet available", "b": "", "d": "CrashLoopBackOff: back-off"})

	var got State
	require.NoError(t, json.Unmarshal([]byte(oldRecord), &got))
	assert.True(t, want.Equal(got), "decoded %+v", got)
	assert.Equal(t, normalState(want), normalState(got))
	at, ok := got.AssignedAt("b")
	assert.True(t, ok)
	assert.Equal(t, t0.Add(1500*time.Millisecond), at, "read back in UTC, to the nanosecond")
	msg, ok := got.PendingMessage("b")
	assert.True(t, ok, "an empty pending message is pending")
	assert.Empty(t, msg)
	_, ok = got.AssignedAt("d")
	assert.False(t, ok, "d is pending without an assignment")

	raw, err := json.Marshal(got)
	require.NoError(t, err)
	assert.Equal(t, oldRecord, string(raw), "re-encoded byte for byte")

	head, err := json.Marshal(got.Head())
	require.NoError(t, err)
	assert.Equal(t, `{"target":"v2","stable":"v1","previous":"v0","paused":true,"pauseReason":"why","operatorPaused":true,`+
		`"rolledBackFrom":"v3","rollbackReason":"because","canaryPromoted":true,"canaryAvailableSince":"2026-01-01T00:00:03Z",`+
		`"complete":true}`, string(head))
	for node, entry := range map[string]string{
		"a": `{"at":"2026-01-01T00:00:00Z","p":"not yet available","hp":true}`,
		"b": `{"at":"2026-01-01T00:00:01.5Z","hp":true,"w":true}`,
		"c": `{"at":"2026-01-01T00:00:02.000000001Z","f":"Failed: exit 1","hf":true}`,
		"d": `{"p":"CrashLoopBackOff: back-off","hp":true}`,
	} {
		e, ok := got.Entry(node)
		require.True(t, ok, node)
		raw, err := json.Marshal(e)
		require.NoError(t, err)
		assert.Equal(t, entry, string(raw), "node %s's entry", node)
	}
}

// TestStateJSONDecodesIntoAState: as encoding/json into a struct, fields
// absent from the record keep their values and maps gain its entries.
func TestStateJSONDecodesIntoAState(t *testing.T) {
	st := withProgress(State{Target: "v1", Complete: true}, map[string]time.Time{"a": t0}, map[string]string{"b": "x"})
	require.NoError(t, json.Unmarshal([]byte(`{"target":"v2","assignedAt":{"c":"2026-01-01T00:00:01Z"},"pending":{"a":"y"}}`), &st))
	want := withProgress(State{Target: "v2", Complete: true},
		map[string]time.Time{"a": t0, "c": t0.Add(time.Second)}, map[string]string{"a": "y", "b": "x"})
	assert.True(t, want.Equal(st), "%+v", st)
	assert.Error(t, json.Unmarshal([]byte(`{"assignedAt":{"a":1}}`), &st))
}

// TestPropertyStateJSONRoundTrip: any state reads back equal from its JSON,
// which reads back to the same bytes.
func TestPropertyStateJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 0x15))
	for round := range 300 {
		st := randomEntriesState(rng)
		raw, err := json.Marshal(st)
		require.NoError(t, err)
		var back State
		require.NoError(t, json.Unmarshal(raw, &back), "round %d: %s", round, raw)
		require.True(t, st.Equal(back), "round %d: %s", round, raw)
		again, err := json.Marshal(back)
		require.NoError(t, err)
		require.Equal(t, string(raw), string(again), "round %d", round)
	}
}

// TestStateJSONHasEveryField: stateJSON, State's stored form, holds every
// exported field of State, of the same type.
func TestStateJSONHasEveryField(t *testing.T) {
	stored := reflect.TypeFor[stateJSON]()
	st := reflect.TypeFor[State]()
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		sf, ok := stored.FieldByName(f.Name)
		if assert.True(t, ok, "State.%s is not stored", f.Name) {
			assert.Equal(t, f.Type, sf.Type, "State.%s", f.Name)
		}
	}
}

func TestProgressIs16Bytes(t *testing.T) {
	assert.Equal(t, uintptr(16), unsafe.Sizeof(progress{}))
}

// TestProgressSetters: the setters keep a node's two records apart, and a
// node with neither has no entry.
func TestProgressSetters(t *testing.T) {
	var st State
	st.clearPending("a")
	st.dropProgress("a")
	assert.Nil(t, st.progress, "clearing creates no map")
	st.setAssigned("a", t0)
	st.setPending("a", "x")
	st.clearPending("a")
	at, ok := st.AssignedAt("a")
	assert.True(t, ok)
	assert.Equal(t, t0, at)
	_, ok = st.PendingMessage("a")
	assert.False(t, ok)
	st.setPending("b", "")
	st.clearPending("b")
	st.dropProgress("a")
	assert.Empty(t, st.progress, fmt.Sprintf("%v", st.progress))
	assert.Zero(t, st.assignedCount())
}
