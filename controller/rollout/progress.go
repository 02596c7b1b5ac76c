package rollout

import (
	"encoding/json"
	"time"
	"unique"
)

// progress is where one node stands in its progress window: when it was
// assigned the target by this rollout and, while its target instance has
// not been available within the window, the state that instance last
// reported. It is 16 bytes, with no pointer to a string of its own: a
// State holds one for every node a rollout moved, and the messages are few
// ("not yet available", a phase and its message) and interned.
type progress struct {
	// at is the assignment instant in unix nanoseconds (years 1678 to
	// 2262); zero: not assigned.
	at int64
	// pending is the instance's last state; the zero handle: not pending.
	// An empty message is pending all the same.
	pending unique.Handle[string]
}

func (pr progress) assigned() bool { return pr.at != 0 }

// assignedAt is the assignment instant, in UTC.
func (pr progress) assignedAt() time.Time { return time.Unix(0, pr.at).UTC() }

func (pr progress) isPending() bool { return pr.pending != unique.Handle[string]{} }

// AssignedAt returns when node was assigned the target, in UTC; ok is
// false when it was not.
func (st State) AssignedAt(node string) (at time.Time, ok bool) {
	pr := st.progress[node]
	if !pr.assigned() {
		return time.Time{}, false
	}
	return pr.assignedAt(), true
}

// PendingMessage returns the last state of node's target instance while it
// is pending (assigned, and not available within its progress window);
// ok is false when it is not.
func (st State) PendingMessage(node string) (msg string, ok bool) {
	pr := st.progress[node]
	if !pr.isPending() {
		return "", false
	}
	return pr.pending.Value(), true
}

// assignedCount is the number of nodes with progress: those assigned the
// target (and any pending without an assignment, which Step never makes).
func (st *State) assignedCount() int { return len(st.progress) }

// setAssigned records that node was assigned the target at at, which is
// not zero; its pending state is kept.
func (st *State) setAssigned(node string, at time.Time) {
	pr := st.progress[node]
	pr.at = at.UnixNano()
	st.putProgress(node, pr)
}

// setPending records msg as node's pending state.
func (st *State) setPending(node, msg string) {
	pr := st.progress[node]
	pr.pending = unique.Make(msg)
	st.putProgress(node, pr)
}

// clearPending records that node is not pending.
func (st *State) clearPending(node string) {
	pr, ok := st.progress[node]
	if !ok {
		return
	}
	pr.pending = unique.Handle[string]{}
	st.putProgress(node, pr)
}

// dropProgress forgets node's assignment and pending state.
func (st *State) dropProgress(node string) { st.putProgress(node, progress{}) }

// putProgress makes pr node's progress; a zero pr removes the node. A
// map is created only to hold a node, and stays once created, even
// empty: a State's copies share its maps (a Tracker's pass and the state
// it may restore), so every copy must keep seeing the same one.
func (st *State) putProgress(node string, pr progress) {
	if pr == (progress{}) {
		delete(st.progress, node)
		return
	}
	st.progress = put(st.progress, node, pr)
}

// progressOf is the progress e records.
func progressOf(e NodeEntry) progress {
	pr := progress{}
	if !e.AssignedAt.IsZero() {
		pr.at = e.AssignedAt.UnixNano()
	}
	if e.HasPending {
		pr.pending = unique.Make(e.Pending)
	}
	return pr
}

// stateJSON is how a State is stored: its fields, with the nodes' progress
// as the two maps (assignedAt and pending) a State held before progress
// did, so that records written before and after read the same and a
// State writes the same bytes. Its fields are State's, in the order and
// with the names State's JSON had.
type stateJSON struct {
	Target               string               `json:"target"`
	Stable               string               `json:"stable,omitempty"`
	Previous             string               `json:"previous,omitempty"`
	AssignedAt           map[string]time.Time `json:"assignedAt,omitempty"`
	Failed               map[string]string    `json:"failed,omitempty"`
	Pending              map[string]string    `json:"pending,omitempty"`
	Away                 map[string]bool      `json:"away,omitempty"`
	Paused               bool                 `json:"paused,omitempty"`
	PauseReason          string               `json:"pauseReason,omitempty"`
	OperatorPaused       bool                 `json:"operatorPaused,omitempty"`
	RolledBackFrom       string               `json:"rolledBackFrom,omitempty"`
	RollbackReason       string               `json:"rollbackReason,omitempty"`
	CanaryPromoted       bool                 `json:"canaryPromoted,omitempty"`
	CanaryAvailableSince time.Time            `json:"canaryAvailableSince,omitzero"`
	Complete             bool                 `json:"complete,omitempty"`
	StaleLocks           map[string]time.Time `json:"staleLocks,omitempty"`
	LockOverrides        map[string]time.Time `json:"lockOverrides,omitempty"`
}

// MarshalJSON encodes st as stateJSON.
func (st State) MarshalJSON() ([]byte, error) { return json.Marshal(st.toJSON()) }

// UnmarshalJSON decodes a stateJSON into st, as encoding/json decodes into
// a struct: the fields data does not hold keep their values, and its map
// entries are added to st's. An assignment at the zero instant is no
// assignment (as in a NodeEntry).
func (st *State) UnmarshalJSON(data []byte) error {
	j := st.toJSON()
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*st = j.state()
	return nil
}

func (st *State) toJSON() stateJSON {
	j := stateJSON{Target: st.Target, Stable: st.Stable, Previous: st.Previous, Failed: st.Failed, Away: st.Away,
		Paused: st.Paused, PauseReason: st.PauseReason, OperatorPaused: st.OperatorPaused,
		RolledBackFrom: st.RolledBackFrom, RollbackReason: st.RollbackReason, CanaryPromoted: st.CanaryPromoted,
		CanaryAvailableSince: st.CanaryAvailableSince, Complete: st.Complete,
		StaleLocks: st.StaleLocks, LockOverrides: st.LockOverrides}
	for node, pr := range st.progress {
		if pr.assigned() {
			j.AssignedAt = put(j.AssignedAt, node, pr.assignedAt())
		}
		if pr.isPending() {
			j.Pending = put(j.Pending, node, pr.pending.Value())
		}
	}
	return j
}

func (j *stateJSON) state() State {
	st := State{Target: j.Target, Stable: j.Stable, Previous: j.Previous, Failed: j.Failed, Away: j.Away,
		Paused: j.Paused, PauseReason: j.PauseReason, OperatorPaused: j.OperatorPaused,
		RolledBackFrom: j.RolledBackFrom, RollbackReason: j.RollbackReason, CanaryPromoted: j.CanaryPromoted,
		CanaryAvailableSince: j.CanaryAvailableSince, Complete: j.Complete,
		StaleLocks: j.StaleLocks, LockOverrides: j.LockOverrides}
	for node, at := range j.AssignedAt {
		if !at.IsZero() {
			st.setAssigned(node, at)
		}
	}
	for node, msg := range j.Pending {
		st.setPending(node, msg)
	}
	return st
}
