package rollout

import (
	"math"
	"slices"
	"time"
)

// noTime stands for the zero time in unix nanoseconds.
const noTime = math.MinInt64

// nanos is t in unix nanoseconds (t within years 1678 to 2262), noTime
// for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return noTime
	}
	return t.UnixNano()
}

// fromNanos is the instant nanos recorded, in UTC.
func fromNanos(ns int64) time.Time {
	if ns == noTime {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// interner interns the revisions and phases members hold, so a member
// stores four bytes for each.
type interner struct {
	ids  map[string]uint32
	strs []string
}

func newInterner() interner { return interner{ids: map[string]uint32{}} }

func (s *interner) id(str string) uint32 {
	if id, ok := s.ids[str]; ok {
		return id
	}
	id := uint32(len(s.strs))
	s.strs = append(s.strs, str)
	s.ids[str] = id
	return id
}

func (s *interner) str(id uint32) string { return s.strs[id] }

// The requeue queue is a binary min-heap of members keyed by their
// requeue instant (when the clock alone may change their decision);
// member.slot is each member's position in it. Members that never requeue
// are not in it, and hold no instant.

// queued is one member of the requeue queue.
type queued struct {
	at     int64 // unix nanoseconds
	member int32 // index in Tracker.members
}

// setRequeue moves member i to instant at (noTime: out of the queue).
func (t *Tracker) setRequeue(i int32, at int64) {
	m := &t.members[i]
	switch {
	case m.slot >= 0 && at == noTime:
		t.unqueue(int(m.slot))
	case m.slot >= 0:
		t.queue[m.slot].at = at
		t.fix(int(m.slot))
	case at != noTime:
		m.slot = int32(len(t.queue))
		t.queue = append(t.queue, queued{at: at, member: i})
		t.up(int(m.slot))
	}
}

// queueMin is the earliest requeue instant, zero if none.
func (t *Tracker) queueMin() time.Time {
	if len(t.queue) == 0 {
		return time.Time{}
	}
	return fromNanos(t.queue[0].at)
}

// unqueue removes the member at slot from the queue.
func (t *Tracker) unqueue(slot int) {
	t.members[t.queue[slot].member].slot = -1
	last := len(t.queue) - 1
	if slot != last {
		t.queue[slot] = t.queue[last]
		t.members[t.queue[slot].member].slot = int32(slot)
	}
	t.queue = t.queue[:last]
	if slot != last {
		t.fix(slot)
	}
}

func (t *Tracker) fix(slot int) {
	if !t.down(slot) {
		t.up(slot)
	}
}

func (t *Tracker) less(a, b int) bool {
	return t.queue[a].at < t.queue[b].at
}

func (t *Tracker) swap(a, b int) {
	t.queue[a], t.queue[b] = t.queue[b], t.queue[a]
	t.members[t.queue[a].member].slot = int32(a)
	t.members[t.queue[b].member].slot = int32(b)
}

func (t *Tracker) up(slot int) {
	for slot > 0 {
		parent := (slot - 1) / 2
		if !t.less(slot, parent) {
			return
		}
		t.swap(slot, parent)
		slot = parent
	}
}

// down sifts slot down and reports whether it moved.
func (t *Tracker) down(slot int) bool {
	start := slot
	for {
		child := 2*slot + 1
		if child >= len(t.queue) {
			break
		}
		if right := child + 1; right < len(t.queue) && t.less(right, child) {
			child = right
		}
		if !t.less(child, slot) {
			break
		}
		t.swap(slot, child)
		slot = child
	}
	return slot > start
}

// enqueueWaiting puts m's name in the waiting heap its part belongs to,
// unless it is there already.
func (t *Tracker) enqueueWaiting(m *member) {
	for _, flag := range [...]uint8{flagWaitingAvailable, flagWaitingUnavailable} {
		if m.part.flags&flag == 0 || m.waiting&flag != 0 {
			continue
		}
		m.waiting |= flag
		h := t.waitingHeap(flag, m.part.domain)
		*h = append(*h, m.name)
		upNames(*h, len(*h)-1)
		if len(*h) > 2*len(t.members)+64 {
			t.compactWaiting(h, flag, m.part.domain)
		}
	}
}

// waitingHeap is the heap of the members whose part has flag: the one of
// their domain for available ones under a per-topology budget.
func (t *Tracker) waitingHeap(flag uint8, domain uint32) *[]string {
	if flag == flagWaitingAvailable {
		if t.s.Topology != nil {
			return t.domainHeap(domain)
		}
		return &t.waitingAvailable
	}
	return &t.waitingUnavailable
}

// popWaiting removes and returns the first member by name whose part
// still matches flag; false when none does.
func (t *Tracker) popWaiting(h *[]string, flag uint8) (int32, bool) {
	for len(*h) > 0 {
		name := (*h)[0]
		last := len(*h) - 1
		(*h)[0] = (*h)[last]
		*h = (*h)[:last]
		downNames(*h, 0)
		i, ok := t.index.find(t.members, name)
		if !ok || t.members[i].waiting&flag == 0 {
			continue // removed, or a duplicate of an entry already taken
		}
		m := &t.members[i]
		m.waiting &^= flag
		if m.part.flags&flag != 0 {
			return i, true
		}
	}
	return 0, false
}

// compactWaiting rebuilds h, the heap of flag (and domain's, under a
// per-topology budget), from the members whose part matches flag,
// dropping the entries left by removed members and changed parts.
func (t *Tracker) compactWaiting(h *[]string, flag uint8, domain uint32) {
	clear(*h)
	*h = (*h)[:0]
	byDomain := flag == flagWaitingAvailable && t.s.Topology != nil
	for i := range t.members {
		m := &t.members[i]
		if byDomain && m.part.domain != domain {
			continue
		}
		m.waiting &^= flag
		if m.part.flags&flag != 0 {
			m.waiting |= flag
			*h = append(*h, m.name)
		}
	}
	slices.Sort(*h)
}

func upNames(h []string, k int) {
	for k > 0 {
		parent := (k - 1) / 2
		if h[parent] <= h[k] {
			return
		}
		h[k], h[parent] = h[parent], h[k]
		k = parent
	}
}

func downNames(h []string, k int) {
	for {
		child := 2*k + 1
		if child >= len(h) {
			return
		}
		if right := child + 1; right < len(h) && h[right] < h[child] {
			child = right
		}
		if h[k] <= h[child] {
			return
		}
		h[k], h[child] = h[child], h[k]
		k = child
	}
}
