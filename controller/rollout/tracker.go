package rollout

import (
	"slices"
	"time"
)

// Tracker holds one daemonset's rollout: the nodes that should run it, the
// persisted State, and each node's share of the last decision. Step
// recomputes only what can have changed since the last Step and returns
// exactly what Step over every node would return. Not safe for concurrent
// use.
//
// A Step recomputes a node when it was Set since the last Step, when the
// clock reached the instant its decision may change by itself (an offline
// grace, minReadySeconds or progress deadline expiring), or when its last
// decision differs from what it was last Set with. The other nodes keep
// their decision and their counts; a batch takes the first waiting nodes
// from two name-ordered heaps, as Step's update orders them. A Step visits
// every node (Delta.Full) only when it is the first, when the strategy or
// the state was replaced, or when a failure threshold is crossed (a pause
// or a rollback).
type Tracker struct {
	s  Strategy
	st State
	// full: the next Step visits every node.
	full bool
	// rebased: the state was given from outside (NewTracker, a SetState
	// that changed it) since the last Step that reported a change, so
	// what the caller stored may differ from it anywhere: Steps report
	// AllChanged until one reports StateChanged.
	rebased bool

	members []member
	index   nameIndex // member by node name
	queue   []queued  // members with a requeue instant, a min-heap on it
	dirty   []string  // members to recompute; member.dirty marks them, stale names are skipped
	// waitingAvailable and waitingUnavailable are min-heaps of the names of
	// the members whose part waits on an older revision, available or not
	// (member.waiting marks them); an entry a member no longer matches is
	// dropped when it reaches the top.
	waitingAvailable   []string
	waitingUnavailable []string
	// domainWaiting replaces waitingAvailable under a per-topology
	// budget: one heap per domain (by Tracker.domains id), an entry
	// whose member's part is now of another domain dropped as stale.
	domainWaiting [][]string
	// pfWaiting holds, per prefetch site (by Tracker.domains id), a
	// name-ordered heap of the members that wait for their download with
	// no ask yet (flagPrefetchQueued marks them; stale entries skipped).
	pfWaiting [][]string
	sum       totals   // the members' parts, summed
	names     interner // revisions and phases, interned
	domains   interner // topology domains, interned
}

// member is one node's facts in compact form, with its share of the last
// decision. The first two assigned revisions and the first observed
// instance are held inline; the rest, rare (a surge pair observed, a
// stale instance, a message, an update lock, an offline node), in extra.
type member struct {
	name        string
	observed    observation
	assigned    [2]uint32 // interned revisions, in the order Set
	extra       *overflow
	slot        int32 // index in Tracker.queue (which holds its requeue instant), -1 if not queued
	nAssigned   uint8 // inline assigned revisions (0 to 2)
	nObserved   uint8 // inline observed instances (0 or 1)
	online      bool
	dirty       bool
	waiting     uint8  // the waiting heaps that hold its name (flagWaiting...)
	canPrefetch bool   // (in what would be padding)
	windows     uint16 // the maintenance windows that select it
	domain      uint32 // its topology domain, interned in Tracker.domains
	prefetching uint32 // interned revision it is asked to prefetch ("" for none)
	pfDomain    uint32 // its prefetch site, interned in Tracker.domains
	part        part
}

// overflow holds a member's assigned revisions past the second, its
// observed instances past the first, the messages of its observed
// instances and when it went offline: what most members do not have.
type overflow struct {
	assigned   []uint32
	observed   []observation
	prefetched []uint32 // Node.Prefetched, interned
	// messages and lockedSince hold the Message and the LockedSince (unix
	// nanoseconds, noTime if zero) of each observed instance, by index over
	// every one (the inline first included); each is nil when no instance
	// has one.
	messages    []string
	lockedSince []int64
	// offlineSince is Node.OfflineSince in unix nanoseconds, noTime if
	// zero.
	offlineSince int64
}

// observation is an Instance in compact form, without its message and
// update lock (see overflow.messages and lockedSince).
type observation struct {
	readySince   int64
	revision     uint32
	phase        uint32
	ready        bool
	lockDeferred bool
}

func (m *member) assignedLen() int {
	if m.extra != nil {
		return int(m.nAssigned) + len(m.extra.assigned)
	}
	return int(m.nAssigned)
}

func (m *member) assignedAt(k int) uint32 {
	if k < len(m.assigned) {
		return m.assigned[k]
	}
	return m.extra.assigned[k-len(m.assigned)]
}

func (m *member) observedLen() int {
	if m.extra != nil {
		return int(m.nObserved) + len(m.extra.observed)
	}
	return int(m.nObserved)
}

func (m *member) observedAt(k int) *observation {
	if k == 0 {
		return &m.observed
	}
	return &m.extra.observed[k-1]
}

// messageAt is the Message of observed instance k.
func (m *member) messageAt(k int) string {
	if m.extra == nil || m.extra.messages == nil {
		return ""
	}
	return m.extra.messages[k]
}

// lockedAt is the LockedSince of observed instance k, noTime if zero.
func (m *member) lockedAt(k int) int64 {
	if m.extra == nil || m.extra.lockedSince == nil {
		return noTime
	}
	return m.extra.lockedSince[k]
}

// offlineSince is Node.OfflineSince in unix nanoseconds, noTime if zero.
func (m *member) offlineSince() int64 {
	if m.extra == nil {
		return noTime
	}
	return m.extra.offlineSince
}

// setFacts stores n's facts in m, interning its strings in names and its
// topology domain (under strategy s) in domains.
func (m *member) setFacts(n *Node, s *Strategy, names, domains *interner) {
	m.domain = domains.id(s.domainOf(n.Labels))
	m.windows = s.windowsOf(n.Labels)
	m.online = n.Online
	m.extra = nil
	if since := nanos(n.OfflineSince); since != noTime {
		m.overflow().offlineSince = since
	}
	m.nAssigned = uint8(min(len(n.Assigned), len(m.assigned)))
	for k, rev := range n.Assigned {
		if k < len(m.assigned) {
			m.assigned[k] = names.id(rev)
			continue
		}
		m.overflow().assigned = append(m.extra.assigned, names.id(rev))
	}
	m.nObserved = uint8(min(len(n.Observed), 1))
	for k := range n.Observed {
		in := &n.Observed[k]
		o := observation{readySince: nanos(in.ReadySince), revision: names.id(in.Revision), phase: names.id(in.Phase),
			ready: in.Ready, lockDeferred: in.LockDeferred}
		m.setRare(k, n.Observed)
		if k == 0 {
			m.observed = o
			continue
		}
		m.overflow().observed = append(m.extra.observed, o)
	}
	m.setPrefetchFacts(n, s, names, domains)
}

// setRare records the message and the update lock of observed instance k
// of observed, in the overflow when it has them.
func (m *member) setRare(k int, observed []Instance) {
	in := &observed[k]
	if in.Message != "" {
		x := m.overflow()
		if x.messages == nil {
			x.messages = make([]string, len(observed))
		}
		x.messages[k] = in.Message
	}
	if !in.LockedSince.IsZero() {
		x := m.overflow()
		if x.lockedSince == nil {
			x.lockedSince = make([]int64, len(observed))
			for j := range x.lockedSince {
				x.lockedSince[j] = noTime
			}
		}
		x.lockedSince[k] = nanos(in.LockedSince)
	}
}

func (m *member) overflow() *overflow {
	if m.extra == nil {
		m.extra = &overflow{offlineSince: noTime}
	}
	return m.extra
}

// Delta is one Tracker.Step's decision: what Step over every node returns,
// with the assignments reduced to the nodes they change.
type Delta struct {
	// Assign holds only the nodes whose decided revisions differ from the
	// Assigned of the facts last Set for them (sorted, as Step's).
	Assign map[string][]string
	// Prefetch holds only the nodes whose prefetch ask (Step's
	// Decision.Prefetch, "" for none) differs from the Prefetching of the
	// facts last Set for them.
	Prefetch map[string]string
	// State is Step's Decision.State. Its maps are the tracker's: valid
	// until the next call that changes the tracker; clone them to keep.
	State State
	// StateChanged: State differs from the state before this Step (the
	// caller stores it only then).
	StateChanged bool
	// Changed lists, sorted, the nodes whose entries (State.Entry) this
	// Step changed: every node whose entries differ from those of the
	// state before it is listed (a listed node's may be the same). A
	// caller that stored the state before this Step brings its record up
	// to date by writing State.Head() and the entries of these nodes.
	Changed []string
	// AllChanged: write the whole state, not just Changed. The tracker
	// cannot say what the caller stored (the state was given to NewTracker
	// or SetState since the last Step that reported StateChanged), or more
	// entries changed than State holds, so a whole write is the smaller.
	AllChanged bool
	Status     Status
	Events     []Event
	// RequeueAt is Step's RequeueAt (the same instant; its location may
	// differ).
	RequeueAt time.Time
	// Full: the step visited every node.
	Full bool
}

// NewTracker returns a tracker for a daemonset with strategy s and
// persisted state st (copied), and no nodes.
func NewTracker(s Strategy, st State) *Tracker {
	return &Tracker{s: s, st: cloneState(st), full: true, rebased: true, index: newNameIndex(),
		names: newInterner(), domains: newInterner()}
}

// SetStrategy replaces the strategy (the spec changed); the next Step
// visits every node. When the new strategy reads other labels than the
// old one (SameNodeFacts), the tracker forgets its nodes and reports it:
// the caller Sets every node again before the next Step.
func (t *Tracker) SetStrategy(s Strategy) (forgotNodes bool) {
	same := SameNodeFacts(t.s, s)
	t.s = s
	t.full = true
	if same {
		return false
	}
	*t = Tracker{s: s, st: t.st, full: true, rebased: t.rebased, index: newNameIndex(),
		names: t.names, domains: newInterner()}
	return true
}

// SetState replaces the persisted state (copied) from outside: an operator's
// pause, resume or promotion, a retarget, a stored rollback. The next Step
// visits every node; when st differs from the state, Steps report
// AllChanged until one reports StateChanged.
func (t *Tracker) SetState(st State) {
	if !t.rebased && !t.st.Equal(st) {
		t.rebased = true
	}
	t.st = cloneState(st)
	t.full = true
}

// State is the current persisted state. Its maps are the tracker's:
// callers must not modify them, and must clone them to keep them past the
// next Step.
func (t *Tracker) State() State { return t.st }

// Len is the number of nodes that should run the daemonset.
func (t *Tracker) Len() int { return len(t.members) }

// Set adds or replaces one node's facts: the node should run the
// daemonset. The tracker keeps no reference to n's slices.
//
// It reports whether anything changed (a new node, or other facts): a Set
// with the facts the node already has changes nothing, and the next Step
// costs nothing for it.
func (t *Tracker) Set(n Node) bool {
	i, ok := t.index.find(t.members, n.Name)
	if !ok {
		i = int32(len(t.members))
		t.members = append(t.members, member{name: n.Name, slot: -1})
		t.index.add(t.members, i)
	}
	m := &t.members[i]
	if ok {
		var next member
		next.setFacts(&n, &t.s, &t.names, &t.domains)
		if factsEqual(m, &next) {
			return false
		}
	}
	m.setFacts(&n, &t.s, &t.names, &t.domains)
	t.markDirty(m)
	return true
}

// factsEqual reports whether a and b hold the same facts (not the same
// decision state).
func factsEqual(a, b *member) bool {
	if a.online != b.online || a.offlineSince() != b.offlineSince() || a.domain != b.domain || a.windows != b.windows ||
		a.assignedLen() != b.assignedLen() || a.observedLen() != b.observedLen() {
		return false
	}
	for k := range a.assignedLen() {
		if a.assignedAt(k) != b.assignedAt(k) {
			return false
		}
	}
	for k := range a.observedLen() {
		if *a.observedAt(k) != *b.observedAt(k) || a.messageAt(k) != b.messageAt(k) || a.lockedAt(k) != b.lockedAt(k) {
			return false
		}
	}
	return prefetchFactsEqual(a, b)
}

// Remove forgets a node: it no longer should run the daemonset. Its
// entries in the state stay, as Step leaves those of nodes it is not given.
func (t *Tracker) Remove(name string) {
	i, ok := t.index.find(t.members, name)
	if !ok {
		return
	}
	t.sum.add(t.members[i].part, -1)
	if slot := t.members[i].slot; slot >= 0 {
		t.unqueue(int(slot))
	}
	t.index.remove(t.members, i)
	last := int32(len(t.members) - 1)
	if i != last {
		t.index.move(t.members, last, i)
		t.members[i] = t.members[last]
		if slot := t.members[i].slot; slot >= 0 {
			t.queue[slot].member = i
		}
	}
	t.members[last] = member{}
	t.members = t.members[:last]
}

// Step decides one pass at now (never before the last Step's now): what
// Step(now, strategy, State(), every node Set) returns.
func (t *Tracker) Step(now time.Time) Delta {
	d, ok := Delta{}, false
	if !t.full {
		d, ok = t.stepChanged(now)
	}
	if !ok {
		d = t.stepAll(now)
	}
	if t.rebased {
		d.AllChanged = true
		t.rebased = !d.StateChanged
	}
	return d
}

func (t *Tracker) markDirty(m *member) {
	if !m.dirty {
		m.dirty = true
		t.dirty = append(t.dirty, m.name)
	}
}

// takeDirty returns the members to recompute at now, sorted by name, and
// clears their marks.
func (t *Tracker) takeDirty(now time.Time) []int32 {
	at := now.UnixNano()
	for len(t.queue) > 0 && t.queue[0].at <= at {
		m := &t.members[t.queue[0].member]
		t.unqueue(0)
		t.markDirty(m)
	}
	idx := make([]int32, 0, len(t.dirty))
	for _, name := range t.dirty {
		if i, ok := t.index.find(t.members, name); ok && t.members[i].dirty {
			t.members[i].dirty = false
			idx = append(idx, i)
		}
	}
	t.dirty = emptied(t.dirty)
	slices.SortFunc(idx, func(a, b int32) int { return compareStrings(t.members[a].name, t.members[b].name) })
	return idx
}

// stepChanged is Step over the dirty members only. It reports false, with
// the tracker as it was, when the decision depends on more than them.
func (t *Tracker) stepChanged(now time.Time) (Delta, bool) {
	idx := t.takeDirty(now)
	saved := t.st
	journal := make([]entries, len(idx))
	for k, i := range idx {
		journal[k] = entriesOf(&t.st, t.members[i].name)
	}
	p := &pass{now: now, s: t.s, st: t.st, out: make(map[string][]string, len(idx)), total: len(t.members)}
	views, nexts := t.judgeChanged(p, idx)
	if p.thresholdCrossed() {
		t.restore(saved, idx, journal)
		return Delta{}, false
	}
	for k, i := range idx {
		p.next = time.Time{}
		t.setPart(i, p.decideOne(&views[k]))
		nexts[k] = earliest(nexts[k], p.next)
	}
	if t.prefetchOverLimit(idx) {
		t.restore(saved, idx, journal)
		return Delta{}, false
	}
	d := Delta{}
	p.status = t.sum.status
	var batchNext time.Time
	if p.batchCanMove(t.sum) {
		batchNext, d.StateChanged = t.moveBatch(p, &d)
	}
	t.askPrefetch(p, idx, &d)
	for k, i := range idx {
		moved := !journal[k].equal(entriesOf(&p.st, t.members[i].name))
		if moved {
			d.Changed = append(d.Changed, t.members[i].name)
		}
		t.settle(i, nexts[k], moved, views[k].Assigned, p.out, &d)
	}
	slices.Sort(d.Changed)
	d.Changed = slices.Compact(d.Changed)
	p.next = time.Time{}
	if len(p.s.Windows) > 0 {
		p.windows().waiting = t.sum.windowWaiting[:]
	}
	p.conclude()
	t.st = p.st
	d.State, d.Status, d.Events = p.st, p.status, p.events
	d.RequeueAt = earliest(earliest(p.next, t.queueMin()), batchNext)
	d.StateChanged = d.StateChanged || !scalarsEqual(saved, p.st) || len(d.Changed) > 0
	return d, true
}

// judgeChanged builds the views of the members idx and records their
// failures in p.st, returning the views and each one's requeue instant.
func (t *Tracker) judgeChanged(p *pass, idx []int32) ([]nodeView, []time.Time) {
	nodes := make([]Node, len(idx))
	views := make([]nodeView, len(idx))
	nexts := make([]time.Time, len(idx))
	var revs []string
	var obs []Instance
	for k, i := range idx {
		nodes[k], revs, obs = t.appendNode(&t.members[i], revs, obs)
		p.next = time.Time{}
		views[k] = p.viewOf(&nodes[k])
		p.detectFailure(&views[k])
		nexts[k] = p.next
	}
	return views, nexts
}

// decideOne assigns one node as the first loop of assign does and returns
// its part.
func (p *pass) decideOne(v *nodeView) part {
	waiting := p.assignOne(v)
	out := p.out[v.Name]
	phase, unavailable := p.phaseOf(v, out)
	pt := makePart(phase, unavailable, waiting, v.available, len(out) > 1, slices.Contains(out, p.st.Target))
	if p.staleLock(v.Name) {
		pt.flags |= flagStaleLock
	}
	pt.windows, pt.domain = v.Node.windows, v.Node.domainID // a tracker's nodes are resolved
	pt.pf, pt.pfDomain = v.pf, v.Node.pfDomainID
	return pt
}

// batchCanMove reports whether update would move a waiting node, given the
// parts summed: only then do the decisions depend on every waiting node.
func (p *pass) batchCanMove(sum totals) bool {
	if p.s.OnDelete || p.held() || sum.waiting == 0 {
		return false
	}
	if p.canaryLimit()-sum.onTarget <= 0 {
		return false
	}
	if sum.waitingUnavailable > 0 {
		return true // they move without spending budget
	}
	maxUnavailable, maxSurge := p.budget()
	if maxSurge > 0 {
		return sum.surging < maxSurge
	}
	return sum.status.Unavailable < maxUnavailable
}

// setPart replaces member i's part, in the sums and the waiting heaps.
func (t *Tracker) setPart(i int32, pt part) {
	m := &t.members[i]
	t.sum.add(m.part, -1)
	t.sum.add(pt, 1)
	if m.part.domain != pt.domain {
		m.waiting &^= flagWaitingAvailable // its entry, if any, is in the old domain's heap: stale
	}
	if m.part.pfDomain != pt.pfDomain {
		m.waiting &^= flagPrefetchQueued // likewise in the old prefetch site's heap
	}
	m.part = pt
	t.enqueueWaiting(m)
	t.enqueuePrefetch(m)
}

// settle stores member i's requeue instant and reports its assignment in d
// when it differs from what the node was Set with. A node whose entries
// this step changed (moved), or whose assignment differs, is recomputed at
// the next Step too: only a node that its own stages leave as it is keeps
// its decision until its requeue instant.
func (t *Tracker) settle(i int32, next time.Time, moved bool, assigned []string, out map[string][]string, d *Delta) {
	m := &t.members[i]
	t.setRequeue(i, nanos(next))
	revs := out[m.name]
	if !slices.Equal(revs, assigned) {
		d.report(m.name, revs)
	}
	if moved || !slices.Equal(revs, assigned) {
		t.markDirty(m)
	}
}

func (d *Delta) report(node string, revs []string) {
	if d.Assign == nil {
		d.Assign = map[string][]string{}
	}
	d.Assign[node] = revs
}

// moveBatch is update over the waiting heaps: the unavailable waiting
// nodes first, then the available ones, each in name order, while the
// canary room and the budget allow, as update moves them. It adjusts
// p.status to the moved nodes' new phases, reports them in d and marks
// them for the next Step; it returns their earliest requeue instant and
// whether it changed their entries in the state.
func (t *Tracker) moveBatch(p *pass, d *Delta) (next time.Time, changed bool) {
	maxUnavailable, maxSurge := p.budget()
	unavailable, surging := t.sum.status.Unavailable, t.sum.surging
	room := p.canaryLimit() - t.sum.onTarget
	move := func(i int32, surge bool) {
		p.next = time.Time{}
		changed = t.moveOne(p, i, surge, d) || changed
		next = earliest(next, p.next)
		room--
	}
	for room > 0 {
		i, ok := t.popWaiting(&t.waitingUnavailable, flagWaitingUnavailable)
		if !ok {
			break
		}
		move(i, false)
	}
	if p.s.Topology != nil {
		t.moveByDomain(p, room, maxUnavailable-unavailable, maxSurge-surging, maxSurge > 0, move)
		return next, changed
	}
	for room > 0 && (maxSurge > 0 && surging < maxSurge || maxSurge == 0 && unavailable < maxUnavailable) {
		i, ok := t.popWaiting(&t.waitingAvailable, flagWaitingAvailable)
		if !ok {
			break
		}
		move(i, maxSurge > 0)
		if maxSurge > 0 {
			surging++
		} else {
			unavailable++
		}
	}
	return next, changed
}

// moveOne assigns member i the target (beside its revisions for a surge
// pair), as update does, and reports whether its entries changed.
func (t *Tracker) moveOne(p *pass, i int32, surge bool, d *Delta) bool {
	m := &t.members[i]
	n, _, _ := t.appendNode(m, nil, nil)
	v := p.viewOf(&n)
	before := entriesOf(&p.st, m.name)
	if surge {
		p.out[m.name] = sortedPair(v.Assigned, p.st.Target)
		p.markAssigned(m.name)
	} else {
		p.set(&v, p.st.Target)
	}
	phase, unavailable := p.phaseOf(&v, p.out[m.name])
	p.status.add(phaseOfCode[m.part.phase], m.part.flags&flagUnavailable != 0, -1)
	p.status.add(phase, unavailable, 1)
	d.report(m.name, p.out[m.name])
	t.markDirty(m)
	if before.equal(entriesOf(&p.st, m.name)) {
		return false
	}
	d.Changed = append(d.Changed, m.name)
	return true
}

// restore undoes a stepChanged that gave up: the state's scalars and maps
// as saved, and the entries of the members idx as journaled.
func (t *Tracker) restore(saved State, idx []int32, journal []entries) {
	for k, i := range idx {
		journal[k].restore(&saved, t.members[i].name)
	}
	t.st = saved
}

// stepAll runs Step over every node and rebuilds every member's part.
func (t *Tracker) stepAll(now time.Time) Delta {
	nodes := t.allNodes()
	before := t.st
	dec := Step(now, t.s, t.st, nodes)
	t.st = dec.State
	t.full = false
	t.rebuild(now, nodes)
	d := Delta{State: dec.State, Status: dec.Status, Events: dec.Events, RequeueAt: dec.RequeueAt, Full: true,
		StateChanged: !before.Equal(dec.State)}
	if d.StateChanged {
		d.Changed, d.AllChanged = changedEntries(before, dec.State)
	}
	for i := range nodes {
		if revs := dec.Assign[nodes[i].Name]; !slices.Equal(revs, nodes[i].Assigned) {
			if d.Assign == nil {
				d.Assign = map[string][]string{}
			}
			d.Assign[nodes[i].Name] = revs
			t.markDirty(&t.members[i])
		}
		if ask := dec.Prefetch[nodes[i].Name]; ask != nodes[i].Prefetching {
			d.reportPrefetch(nodes[i].Name, ask)
			t.markDirty(&t.members[i])
		}
	}
	return d
}

// rebuild recomputes every member's part and requeue instant after a full
// Step at now: the per-node stages again, over the state Step returned.
// A node those stages would change (an instance failed at its deadline
// while available recovers at the next pass) keeps its entries as Step
// left them and is recomputed at the next Step.
func (t *Tracker) rebuild(now time.Time, nodes []Node) {
	for _, name := range t.dirty {
		if i, ok := t.index.find(t.members, name); ok {
			t.members[i].dirty = false
		}
	}
	t.dirty = emptied(t.dirty)
	t.queue = t.queue[:0]
	t.sum = totals{}
	t.waitingAvailable, t.waitingUnavailable = t.waitingAvailable[:0], t.waitingUnavailable[:0]
	for d := range t.domainWaiting {
		t.domainWaiting[d] = t.domainWaiting[d][:0]
	}
	for d := range t.pfWaiting {
		t.pfWaiting[d] = t.pfWaiting[d][:0]
	}
	p := &pass{now: now, s: t.s, st: t.st, out: make(map[string][]string, 1), total: len(t.members)}
	for i := range t.members {
		m := &t.members[i]
		e := entriesOf(&p.st, m.name)
		p.next = time.Time{}
		v := p.viewOf(&nodes[i])
		p.detectFailure(&v)
		m.part, m.waiting = p.decideOne(&v), 0
		t.sum.add(m.part, 1)
		t.enqueueWaiting(m)
		t.enqueuePrefetch(m)
		m.slot = -1
		if at := nanos(p.next); at != noTime {
			m.slot = int32(len(t.queue))
			t.queue = append(t.queue, queued{at: at, member: int32(i)})
		}
		moved := !e.equal(entriesOf(&p.st, m.name))
		if moved {
			e.restore(&p.st, m.name)
		}
		if moved || !slices.Equal(p.out[m.name], nodes[i].Assigned) {
			t.markDirty(m)
		}
		delete(p.out, m.name)
	}
	for k := len(t.queue)/2 - 1; k >= 0; k-- {
		t.down(k)
	}
	slices.Sort(t.waitingAvailable) // a sorted slice is a heap
	for _, h := range t.domainWaiting {
		slices.Sort(h)
	}
	for _, h := range t.pfWaiting {
		slices.Sort(h)
	}
	slices.Sort(t.waitingUnavailable)
}

// allNodes is every member as a Node, sharing two backing arrays.
func (t *Tracker) allNodes() []Node {
	nAssigned, nObserved := 0, 0
	for i := range t.members {
		nAssigned += t.members[i].assignedLen()
		nObserved += t.members[i].observedLen()
	}
	nodes := make([]Node, len(t.members))
	revs := make([]string, 0, nAssigned)
	obs := make([]Instance, 0, nObserved)
	for i := range t.members {
		nodes[i], revs, obs = t.appendNode(&t.members[i], revs, obs)
	}
	return nodes
}

// appendNode expands m into a Node whose slices are appended to revs and
// obs.
func (t *Tracker) appendNode(m *member, revs []string, obs []Instance) (Node, []string, []Instance) {
	n := Node{Name: m.name, Online: m.online, OfflineSince: fromNanos(m.offlineSince()),
		resolved: true, domain: t.domains.str(m.domain), domainID: m.domain, windows: m.windows}
	start := len(revs)
	for k := range m.assignedLen() {
		revs = append(revs, t.names.str(m.assignedAt(k)))
	}
	n.Assigned = revs[start:len(revs):len(revs)]
	start = len(obs)
	for k := range m.observedLen() {
		o := m.observedAt(k)
		obs = append(obs, Instance{Revision: t.names.str(o.revision), Ready: o.ready,
			ReadySince: fromNanos(o.readySince), Phase: t.names.str(o.phase), Message: m.messageAt(k),
			LockedSince: fromNanos(m.lockedAt(k)), LockDeferred: o.lockDeferred})
	}
	n.Observed = obs[start:len(obs):len(obs)]
	t.prefetchNode(m, &n)
	return n, revs, obs
}

// maxKeptDirty is the capacity of Tracker.dirty kept between Steps: a
// Step over a whole fleet (a new daemonset, a batch) leaves it long, and
// the few nodes an event marks need little of it.
const maxKeptDirty = 256

// emptied returns s with no elements, releasing its array when it holds
// more than maxKeptDirty.
func emptied(s []string) []string {
	if cap(s) > maxKeptDirty {
		return nil
	}
	return s[:0]
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
