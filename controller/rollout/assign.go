package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// assign decides every node's revisions: settled nodes keep theirs, nodes
// with nothing get the target, and waiting nodes move within the budget.
func (p *pass) assign() {
	var waiting []*nodeView
	for i := range p.view {
		v := &p.view[i]
		if p.assignOne(v) {
			waiting = append(waiting, v)
		}
	}
	if p.s.OnDelete || p.held() {
		return
	}
	p.update(waiting)
}

// assignOne decides what one node runs before any batch moves: settled
// nodes keep theirs and a node with nothing gets the fallback. It reports
// whether the node waits on an older revision (a candidate for update).
func (p *pass) assignOne(v *nodeView) (waiting bool) {
	v.pf = p.prefetchOf(v)
	switch {
	case len(v.Assigned) == 0:
		p.set(v, p.fallback())
	case v.offline:
		p.keep(v)
	case p.yieldDeferred(v):
	case v.onTarget:
		p.settle(v)
	default:
		p.keep(v)
		if !p.s.OnDelete && !p.maintenanceOpen(v) {
			v.windowClosed = true
			return false
		}
		if _, held := p.heldLock(v); held {
			v.heldByLock = true
			return false
		}
		return !v.pf.has(pfWaits)
	}
	return false
}

// fallback is the revision for a node that runs nothing: the target, or the
// stable revision while a failed rollout is paused.
func (p *pass) fallback() string {
	if p.st.Paused && p.st.Stable != "" && len(p.st.Failed) > 0 {
		return p.st.Stable
	}
	return p.st.Target
}

// held reports whether the rollout starts no new batch: paused by the
// operator or by a crossed failure threshold. (A canary holds through
// canaryLimit instead.)
func (p *pass) held() bool {
	return p.s.Paused || p.st.Paused || p.st.OperatorPaused
}

func (p *pass) keep(v *nodeView) { p.out[v.Name] = slices.Clone(v.Assigned) }

// settle finishes a node on the target: a surge pair drops the old
// instance once the target is available.
func (p *pass) settle(v *nodeView) {
	if len(v.Assigned) > 1 && p.targetAvailable(v) {
		p.out[v.Name] = []string{p.st.Target}
		return
	}
	p.keep(v)
}

// set assigns one revision, recording when the target was assigned.
func (p *pass) set(v *nodeView, rev string) {
	p.out[v.Name] = []string{rev}
	if rev == p.st.Target {
		p.markAssigned(v.Name)
	}
}

func (p *pass) markAssigned(node string) {
	if _, ok := p.st.AssignedAt(node); !ok {
		p.st.setAssigned(node, p.now)
		p.st.setPending(node, notYetAvailable)
	}
}

// update moves waiting nodes to the target. Nodes whose current instance
// is unavailable go first and spend no budget; available ones move while
// the budget (maxUnavailable, or maxSurge surge pairs) allows, and their
// domain's budget (maxUnavailablePerTopology) too: a node whose domain has
// none left is passed over for the next.
func (p *pass) update(waiting []*nodeView) {
	if len(waiting) == 0 {
		return // nothing to move: no need to count the budget
	}
	slices.SortStableFunc(waiting, func(a, b *nodeView) int { return boolOrder(a.available, b.available) })
	maxUnavail, maxSurge := p.budget()
	unavailable, surging := p.unavailableAndSurging()
	domains := p.countDomains(maxSurge > 0)
	room := p.canaryLimit() - p.assignedCount()
	for _, v := range waiting {
		if room <= 0 {
			return
		}
		switch {
		case !v.available:
			p.set(v, p.st.Target)
		case maxSurge > 0 && surging < maxSurge && p.takeDomain(domains, v):
			p.out[v.Name] = sortedPair(v.Assigned, p.st.Target)
			p.markAssigned(v.Name)
			surging++
		case maxSurge == 0 && unavailable < maxUnavail && p.takeDomain(domains, v):
			p.set(v, p.st.Target)
			unavailable++
		default:
			continue
		}
		room--
	}
}

// budget resolves maxUnavailable and maxSurge against the nodes that should
// run the daemonset; percentages round up and both zero means one
// unavailable, as in Kubernetes.
func (p *pass) budget() (maxUnavailable, maxSurge int) {
	total := p.total
	maxUnavailable, err := p.s.MaxUnavailable.Scaled(total, true)
	if err != nil {
		maxUnavailable = 1
	}
	maxSurge, err = p.s.MaxSurge.Scaled(total, true)
	if err != nil {
		maxSurge = 0
	}
	if maxUnavailable == 0 && maxSurge == 0 {
		maxUnavailable = 1
	}
	return maxUnavailable, maxSurge
}

// unavailableAndSurging counts reachable nodes that are unavailable and
// nodes running a surge pair, after this pass's assignments so far.
func (p *pass) unavailableAndSurging() (unavailable, surging int) {
	for i := range p.view {
		v := &p.view[i]
		assigned := p.out[v.Name]
		if len(assigned) > 1 {
			surging++ // an offline node's pair still holds its surge slot
		}
		if p.inFlight(v, assigned) {
			unavailable++
		}
	}
	return unavailable, surging
}

// inFlight reports whether the node spends budget under the given
// assignment: a reachable node that does not serve the daemon, or one
// offline past the grace period that was moved to the target while it was
// there and went away before it was seen serving it: it was switching
// when it was lost, and switches whenever it returns, whatever the budget
// is then, so its slot stays taken. Other offline nodes spend none: those
// still waiting are moved under the budget once back, and one moved while
// it was already away (within the grace) gives its slot back when the
// grace ends, so that a node that never returns does not hold the rollout.
func (p *pass) inFlight(v *nodeView, assigned []string) bool {
	if v.offline && !p.lostMidSwitch(v, assigned) {
		return false
	}
	return !p.availableUnder(v, assigned)
}

// lostMidSwitch reports whether an offline node was moved to the target
// before it went away.
func (p *pass) lostMidSwitch(v *nodeView, assigned []string) bool {
	at, ok := p.st.AssignedAt(v.Name)
	return ok && slices.Contains(assigned, p.st.Target) && at.Before(v.OfflineSince)
}

// availableUnder reports whether the node serves the daemon with the given
// assignment: an available observed instance of an assigned revision.
func (p *pass) availableUnder(v *nodeView, assigned []string) bool {
	for i := range v.Observed {
		in := &v.Observed[i]
		if slices.Contains(assigned, in.Revision) && p.availableInstance(in) {
			return true
		}
	}
	return false
}

// canaryLimit is how many nodes may be assigned the target now: all of them,
// or the canary count until the canary is promoted.
func (p *pass) canaryLimit() int {
	if p.s.CanaryNodes == nil || p.st.CanaryPromoted {
		return p.total
	}
	n, err := p.s.CanaryNodes.Scaled(p.total, true)
	if err != nil || n < 1 {
		n = 1
	}
	return min(n, p.total)
}

func (p *pass) assignedCount() int {
	n := 0
	for _, revs := range p.out {
		if slices.Contains(revs, p.st.Target) {
			n++
		}
	}
	return n
}

// finish computes the status, completion and canary promotion.
func (p *pass) finish() {
	for i := range p.view {
		p.count(&p.view[i])
	}
	p.conclude()
}

// conclude completes the status from its per-node counts (Updated,
// Updating, Waiting, Offline, Unavailable), records completion and
// promotes the canary. It reads no node.
func (p *pass) conclude() {
	st := &p.status
	st.Target = p.st.Target
	st.Total = p.total
	st.MaxUnavailable, _ = p.budget()
	st.Failed = len(p.st.Failed)
	st.Paused = p.held()
	st.PauseReason = p.st.PauseReason
	st.RolledBackFrom = p.st.RolledBackFrom
	st.RolledBack = p.st.RolledBackFrom != ""
	st.RollbackReason = p.st.RollbackReason
	st.NextWindow = p.nextWindow()
	st.Complete = st.Updated == st.Total-st.Offline && st.Failed == 0
	if st.Complete && !p.st.Complete {
		if p.st.Stable != p.st.Target {
			p.st.Previous = p.st.Stable
		}
		p.st.Stable = p.st.Target
		p.events = append(p.events, Event{Reason: ReasonComplete, Message: p.completeMessage()})
	}
	p.st.Complete = st.Complete
	p.promoteCanary()
}

func (p *pass) completeMessage() string {
	msg := fmt.Sprintf("revision %s runs on %d of %d nodes", p.st.Target, p.status.Updated, p.status.Total)
	if p.status.Offline > 0 {
		msg += fmt.Sprintf("; %d offline nodes update when they return", p.status.Offline)
	}
	return msg
}

func (p *pass) count(v *nodeView) {
	phase, unavailable := p.phaseOf(v, p.out[v.Name])
	p.status.add(phase, unavailable, 1)
	p.status.Prefetch.add(v.pf, 1)
	if phase == PhaseWaitingForWindow {
		p.countWindows(p.viewWindows(v), 1)
	}
	if p.staleLock(v.Name) {
		p.status.StaleLocks++
	}
}

// phaseOf is where a node stands once assigned the given revisions, and
// whether it is a reachable node that does not serve the daemon. A node
// on the target whose instance failed has PhaseFailed (Status counts
// those from State.Failed).
func (p *pass) phaseOf(v *nodeView, assigned []string) (phase Phase, unavailable bool) {
	onTarget := slices.Contains(assigned, p.st.Target)
	switch {
	case v.offline:
		return PhaseOffline, p.inFlight(v, assigned)
	case onTarget && len(assigned) == 1 && p.targetAvailable(v):
		phase = PhaseUpdated
	case onTarget && p.st.Failed[v.Name] != "":
		phase = PhaseFailed
	case onTarget:
		phase = PhaseUpdating
	case v.windowClosed:
		phase = PhaseWaitingForWindow
	case v.heldByLock:
		phase = PhaseHeldByLock
	case v.pf.has(pfWaits):
		phase = PhaseWaitingForPrefetch
	default:
		phase = PhaseWaiting
	}
	return phase, !p.availableUnder(v, assigned)
}

// add counts delta nodes (1 or -1) in phase, and as unavailable if so.
// Failed is not counted here: it is len(State.Failed).
func (st *Status) add(phase Phase, unavailable bool, delta int) {
	switch phase {
	case PhaseOffline:
		st.Offline += delta
	case PhaseUpdated:
		st.Updated += delta
	case PhaseUpdating:
		st.Updating += delta
	case PhaseWaiting:
		st.Waiting += delta
	case PhaseWaitingForWindow:
		st.WaitingForWindow += delta
	case PhaseHeldByLock:
		st.HeldByLock += delta
	case PhaseWaitingForPrefetch:
		st.WaitingForPrefetch += delta
	}
	if unavailable {
		st.Unavailable += delta
	}
}

// promoteCanary waits for the canary nodes and promotes automatically when
// the strategy says so.
func (p *pass) promoteCanary() {
	if p.s.CanaryNodes == nil || p.st.CanaryPromoted || p.status.Complete {
		return
	}
	limit := p.canaryLimit()
	if p.status.Updated < limit {
		p.st.CanaryAvailableSince = time.Time{}
		return
	}
	p.status.CanaryWaiting = true
	if p.st.CanaryAvailableSince.IsZero() {
		p.st.CanaryAvailableSince = p.now
		p.events = append(p.events, Event{Reason: ReasonCanaryWaiting,
			Message: fmt.Sprintf("%d canary nodes run %s; waiting for promotion", limit, p.st.Target)})
	}
	if p.s.CanaryAutoPromote == 0 {
		return
	}
	at := p.st.CanaryAvailableSince.Add(p.s.CanaryAutoPromote)
	if p.now.Before(at) {
		p.requeue(at)
		return
	}
	p.st.CanaryPromoted = true
	p.requeue(p.now)
}

func (p *pass) decision() Decision {
	return Decision{Assign: p.out, Prefetch: p.asks, State: p.st, Status: p.status, Events: p.events, RequeueAt: p.next}
}

func (p *pass) requeue(at time.Time) {
	if p.next.IsZero() || at.Before(p.next) {
		p.next = at
	}
}

func cloneState(st State) State {
	st.progress = maps.Clone(st.progress)
	st.Failed = maps.Clone(st.Failed)
	st.Away = maps.Clone(st.Away)
	st.StaleLocks = maps.Clone(st.StaleLocks)
	st.LockOverrides = maps.Clone(st.LockOverrides)
	return st
}

func sortedPair(old []string, target string) []string {
	out := append(slices.Clone(old), target)
	slices.Sort(out)
	return slices.Compact(out)
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func compareStrings(a, b string) int { return strings.Compare(a, b) }
