package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/rollout/window"
	"github.com/edgeset/edgeset/schema"
)

// Step decides one pass of the rollout of st.Target over nodes (every node
// that should run the daemonset). It guarantees:
//   - a node is assigned at most two revisions, and two only when the
//     strategy has maxSurge and the node's target instance is not yet
//     available;
//   - without surge, no reachable node that was available is moved while
//     the number of unavailable reachable nodes is at maxUnavailable;
//   - nodes offline longer than the grace period keep their assignment and
//     do not count, but for one moved to the target and not seen serving
//     it, which keeps its slot (it switches whenever it returns); the
//     others are updated under the same budget when they return;
//   - crossing the failure threshold pauses, and with autoRollback retargets
//     the stable revision.
func Step(now time.Time, s Strategy, st State, nodes []Node) Decision {
	st = cloneState(st)
	p := newPass(now, s, st, nodes)
	p.detectFailures()
	if p.thresholdCrossed() {
		if rb, ok := p.rollback(); ok {
			return rb
		}
	}
	p.assign()
	p.decidePrefetch()
	p.finish()
	return p.decision()
}

// pass holds the working set of one Step.
type pass struct {
	now    time.Time
	s      Strategy
	st     State
	nodes  []Node
	view   []nodeView
	out    map[string][]string
	events []Event
	status Status
	next   time.Time
	// total is the number of nodes that should run the daemonset: what
	// percentages scale against. It is len(view) in a full pass; a
	// Tracker's pass views only the nodes that changed.
	total int
	// win is the maintenance windows' part of the pass, nil until a
	// node's windows are looked at (passWindows).
	win *passWindows
	// asks are the nodes asked to prefetch, with the revision.
	asks map[string]string
}

// passWindows are the maintenance windows at a pass's now, and how many
// nodes wait for each (a Tracker's pass reads the tracker's sums).
type passWindows struct {
	states  []window.State
	waiting []int
}

// nodeView is a node with the facts Step derives once.
type nodeView struct {
	*Node
	offline   bool // offline past the grace period: outside the budget
	available bool // some assigned instance is available
	target    *Instance
	onTarget  bool // Target is among the assigned revisions
	// windowClosed: the node waits on an older revision and none of its
	// maintenance windows is open.
	windowClosed bool
	// heldByLock: the node stays on an older revision whose instance
	// holds its update lock (locks.go).
	heldByLock bool
	// pf is the node's prefetch standing (prefetch.go).
	pf prefetchFlags
}

func newPass(now time.Time, s Strategy, st State, nodes []Node) *pass {
	p := &pass{now: now, s: s, st: st, nodes: nodes, out: make(map[string][]string, len(nodes)), total: len(nodes)}
	p.view = make([]nodeView, len(nodes))
	for i := range nodes {
		p.view[i] = p.viewOf(&nodes[i])
	}
	slices.SortFunc(p.view, func(a, b nodeView) int { return compareStrings(a.Name, b.Name) })
	return p
}

func (p *pass) viewOf(n *Node) nodeView {
	v := nodeView{Node: n, onTarget: slices.Contains(n.Assigned, p.st.Target)}
	if !n.Online && p.s.OfflineGrace > 0 && !n.OfflineSince.IsZero() {
		until := n.OfflineSince.Add(p.s.OfflineGrace)
		v.offline = !p.now.Before(until)
		if !v.offline {
			p.requeue(until)
		}
	}
	for i := range n.Observed {
		in := &n.Observed[i]
		if !slices.Contains(n.Assigned, in.Revision) {
			continue
		}
		if in.Revision == p.st.Target {
			v.target = in
		}
		if p.availableInstance(in) {
			v.available = true
		}
	}
	return v
}

// availableInstance reports whether in has been ready for minReadySeconds,
// and asks for a requeue when it will be.
func (p *pass) availableInstance(in *Instance) bool {
	if !in.Ready {
		return false
	}
	if p.s.MinReady == 0 || in.ReadySince.IsZero() {
		return true
	}
	at := in.ReadySince.Add(p.s.MinReady)
	if p.now.Before(at) {
		p.requeue(at)
		return false
	}
	return true
}

func (p *pass) targetAvailable(v *nodeView) bool {
	return v.target != nil && p.availableInstance(v.target)
}

// detectFailures records the target instances that failed within their
// progress window: only nodes this rollout assigned the target count, and
// only for what they do from their assignment until ProgressDeadline (or,
// with no deadline, until their instance is first available). A crash after
// that is the restart policy's business, not the rollout's; a node that
// disconnects within its window gets a new one when it returns, so its
// first reports after a reconnection are not held against it.
func (p *pass) detectFailures() {
	for i := range p.view {
		p.detectFailure(&p.view[i])
	}
}

// detectFailure is detectFailures for one node: it reads and writes only
// that node's entries of the state (and appends its events).
func (p *pass) detectFailure(v *nodeView) {
	p.judgeLock(v)
	at, updated := p.st.AssignedAt(v.Name)
	if !v.onTarget || !updated || v.offline {
		return
	}
	available := p.targetAvailable(v)
	if available {
		delete(p.st.Failed, v.Name) // recovered
	}
	if !v.Online {
		if p.windowOpen(v.Name, at) {
			p.st.Away = setFlag(p.st.Away, v.Name)
		}
		return
	}
	if p.st.Away[v.Name] {
		delete(p.st.Away, v.Name)
		at = p.restartWindow(v.Name)
	}
	p.judge(v, at, available)
}

// windowOpen reports whether node, assigned the target at at, is within its
// progress window.
func (p *pass) windowOpen(node string, at time.Time) bool {
	if p.s.ProgressDeadline == 0 {
		_, pending := p.st.PendingMessage(node)
		return pending
	}
	return p.now.Before(at.Add(p.s.ProgressDeadline))
}

// restartWindow starts node's progress window again now.
func (p *pass) restartWindow(node string) time.Time {
	p.st.setAssigned(node, p.now)
	p.st.setPending(node, notYetAvailable)
	return p.now
}

// judge records what node's target instance does within its window: a
// terminal phase fails at once; at the deadline, the instance fails if it
// was not available at the last pass before it. Past the window nothing
// counts.
func (p *pass) judge(v *nodeView, at time.Time, available bool) {
	_, pending := p.st.PendingMessage(v.Name)
	if p.s.ProgressDeadline > 0 {
		deadline := at.Add(p.s.ProgressDeadline)
		if !p.now.Before(deadline) {
			if pending {
				why := p.deadlineReason(v)
				p.st.clearPending(v.Name)
				p.markFailed(v.Name, why)
			}
			return
		}
		p.requeue(deadline)
	} else if !pending {
		return // first available already: the window is closed
	}
	switch {
	case available:
		p.st.clearPending(v.Name)
	case v.target != nil && (v.target.Phase == schema.PhaseFailed || v.target.Phase == schema.PhaseRefused):
		p.st.clearPending(v.Name)
		p.markFailed(v.Name, fmt.Sprintf("%s: %s", v.target.Phase, v.target.Message))
	default:
		p.st.setPending(v.Name, instanceState(v.target))
	}
}

// deadlineReason says why node failed its progress deadline, with the last
// state its instance reported within the window.
func (p *pass) deadlineReason(v *nodeView) string {
	why := fmt.Sprintf("not available within progressDeadlineSeconds (%s)", p.s.ProgressDeadline)
	if last, _ := p.st.PendingMessage(v.Name); last != "" {
		why += ": " + last
	}
	return why
}

// notYetAvailable is the pending state of a node just assigned the target.
const notYetAvailable = "not yet available"

func instanceState(in *Instance) string {
	switch {
	case in == nil:
		return notYetAvailable
	case in.Message != "":
		return in.Phase + ": " + in.Message
	}
	return in.Phase
}

func setFlag(m map[string]bool, node string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[node] = true
	return m
}

func (p *pass) markFailed(node, why string) {
	if _, seen := p.st.Failed[node]; seen {
		return
	}
	if p.st.Failed == nil {
		p.st.Failed = map[string]string{}
	}
	p.st.Failed[node] = why
	p.events = append(p.events, Event{Reason: ReasonInstanceFailed, Node: node, Message: why, Warning: true})
}

// thresholdCrossed pauses the rollout when the failures reach the
// threshold, or when failed instances hold the whole budget so that the
// rollout could never progress to reach it.
func (p *pass) thresholdCrossed() bool {
	if p.s.FailureThreshold == nil || len(p.st.Failed) == 0 || p.st.Paused {
		return false
	}
	limit, err := p.s.FailureThreshold.Scaled(p.st.assignedCount(), true)
	if err != nil || limit < 1 {
		limit = 1
	}
	failed := len(p.st.Failed)
	switch {
	case failed >= limit:
		p.st.PauseReason = fmt.Sprintf("%d of %d updated instances failed (failureThreshold %s)",
			failed, p.st.assignedCount(), p.s.FailureThreshold)
	case failed >= p.budgetSlots():
		p.st.PauseReason = fmt.Sprintf("%d failed instances hold the whole update budget (%d); the rollout cannot progress",
			failed, p.budgetSlots())
	default:
		return false
	}
	p.st.Paused = true
	p.events = append(p.events, Event{Reason: ReasonPaused, Message: p.st.PauseReason, Warning: true})
	return true
}

// budgetSlots is how many nodes the rollout may have in flight at once.
func (p *pass) budgetSlots() int {
	maxUnavailable, maxSurge := p.budget()
	if maxSurge > 0 {
		return maxSurge
	}
	return maxUnavailable
}

// rollback retargets the stable revision when autoRollback allows it. The
// revision rolled back to has completed before, so no canary gates it: its
// canary slots would be held by the nodes that never left it, and the
// failed nodes would wait for a promotion to get back what worked.
func (p *pass) rollback() (Decision, bool) {
	to := p.st.Stable
	if to == p.st.Target {
		to = p.st.Previous // the failing target had completed, and became stable
	}
	if !p.s.AutoRollback || to == "" || to == p.st.Target {
		return Decision{}, false
	}
	from := p.st.Target
	next := State{Target: to, Stable: to, RolledBackFrom: from, RollbackReason: p.st.PauseReason,
		OperatorPaused: p.st.OperatorPaused, CanaryPromoted: true}
	msg := fmt.Sprintf("rolling back from %s to %s: %s", from, next.Target, p.st.PauseReason)
	d := Step(p.now, p.s, next, p.nodes)
	d.Events = append(append(p.events, Event{Reason: ReasonRollback, Message: msg, Warning: true}), d.Events...)
	return d, true
}
