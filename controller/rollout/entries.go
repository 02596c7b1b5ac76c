package rollout

import (
	"slices"
	"time"
)

// NodeEntry is what a State records of one node: its entries in the
// per-node records (its progress: AssignedAt and PendingMessage; Failed,
// Away, StaleLocks, LockOverrides), so that a state can be
// stored as a Head and one small record per node, and a pass rewrites only
// the nodes it changed.
//
// An AssignedAt entry is present when AssignedAt is not zero, an Away entry
// when Away is true (Step reads only its value, so a false one is the same
// as none), a StaleLock or LockOverride entry when it is not zero (a lock
// is never taken at the zero time); Failed and Pending entries carry their
// presence, since an empty reason is still an entry.
type NodeEntry struct {
	AssignedAt time.Time `json:"at,omitzero"`
	Failed     string    `json:"f,omitempty"`
	HasFailed  bool      `json:"hf,omitempty"`
	Pending    string    `json:"p,omitempty"`
	HasPending bool      `json:"hp,omitempty"`
	Away       bool      `json:"w,omitempty"`
	// StaleLock and LockOverride: when the node's stale lock was taken,
	// and when the lock an operator overrode was.
	StaleLock    time.Time `json:"sl,omitzero"`
	LockOverride time.Time `json:"lo,omitzero"`
}

// IsZero reports whether e records nothing: the node has no entry.
func (e NodeEntry) IsZero() bool {
	return e.AssignedAt.IsZero() && !e.HasFailed && !e.HasPending && !e.Away && e.StaleLock.IsZero() && e.LockOverride.IsZero()
}

// Equal reports whether e and o record the same, instants compared with
// time.Time.Equal.
func (e NodeEntry) Equal(o NodeEntry) bool {
	return e.AssignedAt.Equal(o.AssignedAt) && e.HasFailed == o.HasFailed && e.Failed == o.Failed &&
		e.HasPending == o.HasPending && e.Pending == o.Pending && e.Away == o.Away &&
		e.StaleLock.Equal(o.StaleLock) && e.LockOverride.Equal(o.LockOverride)
}

// Head is st without its per-node maps: what is stored beside the nodes'
// entries. Its fields are st's; its maps are nil.
func (st State) Head() State {
	st.progress, st.Failed, st.Away = nil, nil, nil
	st.StaleLocks, st.LockOverrides = nil, nil
	return st
}

// HasEntries reports whether any of st's per-node maps holds an entry (a
// state whose maps are all nil or empty has none).
func (st State) HasEntries() bool {
	return len(st.progress) > 0 || len(st.Failed) > 0 || len(st.Away) > 0 ||
		len(st.StaleLocks) > 0 || len(st.LockOverrides) > 0
}

// Entry returns node's entries in st; ok is false when it has none.
func (st State) Entry(node string) (e NodeEntry, ok bool) {
	e.AssignedAt, _ = st.AssignedAt(node)
	e.Failed, e.HasFailed = st.Failed[node]
	e.Pending, e.HasPending = st.PendingMessage(node)
	e.Away = st.Away[node]
	e.StaleLock = st.StaleLocks[node]
	e.LockOverride = st.LockOverrides[node]
	return e, !e.IsZero()
}

// SetEntry makes e node's entries in st, creating the maps it needs; an
// entry e does not hold is removed, so a zero e removes the node from
// every map. Maps left empty stay allocated; a nil map and an empty one
// are the same state.
func (st *State) SetEntry(node string, e NodeEntry) {
	st.putProgress(node, progressOf(e))
	if e.HasFailed {
		st.Failed = put(st.Failed, node, e.Failed)
	} else {
		delete(st.Failed, node)
	}
	if e.Away {
		st.Away = put(st.Away, node, true)
	} else {
		delete(st.Away, node)
	}
	setTime(&st.StaleLocks, node, e.StaleLock)
	setTime(&st.LockOverrides, node, e.LockOverride)
}

// setTime puts t as node's entry in *m, or removes the entry when t is
// zero.
func setTime(m *map[string]time.Time, node string, t time.Time) {
	if t.IsZero() {
		delete(*m, node)
		return
	}
	*m = put(*m, node, t)
}

func put[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

// EntryNodes lists, sorted, the nodes that have an entry in st (those for
// which Entry reports ok).
func (st State) EntryNodes() []string {
	out := make([]string, 0, len(st.progress))
	for node, pr := range st.progress {
		if pr.assigned() {
			out = append(out, node)
		}
	}
	// The other maps' nodes are mostly assigned too: only those that are
	// not are added, once.
	var seen map[string]bool
	add := func(node string) {
		if st.progress[node].assigned() || seen[node] {
			return
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[node] = true
		if _, ok := st.Entry(node); ok {
			out = append(out, node)
		}
	}
	eachOtherEntryNode(&st, add)
	slices.Sort(out)
	return out
}

// eachOtherEntryNode calls fn for every node of st's Failed, Away,
// StaleLocks and LockOverrides maps, and those with progress that are not
// assigned (pending only), in no order; a node may come more than once.
func eachOtherEntryNode(st *State, fn func(node string)) {
	for node, pr := range st.progress {
		if !pr.assigned() {
			fn(node)
		}
	}
	for node := range st.Failed {
		fn(node)
	}
	for node := range st.Away {
		fn(node)
	}
	for node := range st.StaleLocks {
		fn(node)
	}
	for node := range st.LockOverrides {
		fn(node)
	}
}

// changedEntries lists, sorted, the nodes whose entries differ between
// before and after. all reports instead that more entries changed than
// after holds: writing after whole is the smaller write.
func changedEntries(before, after State) (changed []string, all bool) {
	seen := make(map[string]bool, max(len(before.progress), len(after.progress)))
	held := 0
	visit := func(node string) {
		if seen[node] {
			return
		}
		seen[node] = true
		e := entriesOf(&after, node)
		if e.held() {
			held++
		}
		if !entriesOf(&before, node).equal(e) {
			changed = append(changed, node)
		}
	}
	for _, st := range []*State{&before, &after} {
		for node := range st.progress {
			visit(node)
		}
		eachOtherEntryNode(st, visit)
	}
	if len(changed) > held {
		return nil, true
	}
	slices.Sort(changed)
	return changed, false
}
