package placement

import (
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Reason classifies the first thing that makes a decision a "no". The
// NoExecute kinds outrank ReasonUntoleratedNoSchedule, since they also stop
// a running instance.
type Reason uint8

// Reasons, in the order Decide checks them.
const (
	// ReasonNone: the daemon should run.
	ReasonNone Reason = iota
	// ReasonNodeSelector: a nodeSelector label is missing or differs.
	ReasonNodeSelector
	// ReasonNodeAffinity: no required node affinity term matches.
	ReasonNodeAffinity
	// ReasonUntoleratedNoSchedule: a NoSchedule taint is not tolerated; a
	// running instance is kept.
	ReasonUntoleratedNoSchedule
	// ReasonUntoleratedNoExecute: a NoExecute taint is not tolerated.
	ReasonUntoleratedNoExecute
	// ReasonTolerationExpired: a NoExecute taint was tolerated for
	// tolerationSeconds, which have run out.
	ReasonTolerationExpired
)

var reasonNames = [...]string{
	ReasonNone:                  "None",
	ReasonNodeSelector:          "NodeSelectorMismatch",
	ReasonNodeAffinity:          "NodeAffinityMismatch",
	ReasonUntoleratedNoSchedule: "UntoleratedNoScheduleTaint",
	ReasonUntoleratedNoExecute:  "UntoleratedNoExecuteTaint",
	ReasonTolerationExpired:     "TolerationExpired",
}

// String returns the reason's name, suitable as an event reason or a metric
// label.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Unknown"
}

// Decision is the placement of one daemonset on one node at one instant.
type Decision struct {
	// ShouldRun: an instance should be started on the node if none runs.
	ShouldRun bool
	// ShouldContinueRunning: an instance already running should be kept.
	// ShouldRun implies it.
	ShouldContinueRunning bool
	// EvictAt, when not zero, is the earliest instant at which a NoExecute
	// taint tolerated only for tolerationSeconds stops being tolerated; the
	// caller should decide again for this node then. It is zero when
	// ShouldContinueRunning is false.
	EvictAt time.Time
	// Reason classifies the decision: ReasonNone when ShouldRun, otherwise
	// the first, most severe, reason it is not; Reasons has them all.
	Reason Reason

	policy *Policy
	node   *schema.Node
	now    time.Time
}

// Decide decides whether the daemonset of p should run on node at now,
// following Kubernetes NodeShouldRunDaemonPod: a nodeSelector or affinity
// mismatch answers no to both questions; an untolerated NoSchedule taint
// keeps new instances off but running ones on; an untolerated NoExecute
// taint, or one whose tolerationSeconds (counted from the taint's
// TimeAdded, or from now when TimeAdded is nil) have run out, answers no to
// both; PreferNoSchedule never blocks. node.Unschedulable counts as the
// taint node.kubernetes.io/unschedulable:NoSchedule, which every daemon
// tolerates.
//
// Decide does not allocate and does not modify node. The Decision keeps
// node for Reasons.
func (p *Policy) Decide(node *schema.Node, now time.Time) Decision {
	d := Decision{policy: p, node: node, now: now}
	switch {
	case !p.selectorMatches(node):
		d.Reason = ReasonNodeSelector
	case !p.affinityMatches(node):
		d.Reason = ReasonNodeAffinity
	default:
		d.ShouldRun, d.ShouldContinueRunning = true, true
		p.applyTaints(node, now, &d)
	}
	return d
}

func (p *Policy) applyTaints(node *schema.Node, now time.Time, d *Decision) {
	if node.Unschedulable {
		p.applyTaint(&cordonTaint, now, d)
	}
	for i := range node.Taints {
		p.applyTaint(&node.Taints[i], now, d)
	}
	if !d.ShouldContinueRunning {
		d.EvictAt = time.Time{}
	}
}

func (p *Policy) applyTaint(taint *schema.Taint, now time.Time, d *Decision) {
	switch taint.Effect {
	case schema.TaintNoSchedule:
		if p.firstToleration(taint) < 0 {
			d.block(ReasonUntoleratedNoSchedule)
		}
	case schema.TaintNoExecute:
		i := p.firstToleration(taint)
		if i < 0 {
			d.block(ReasonUntoleratedNoExecute)
			return
		}
		at, bounded := p.tolerations[i].deadline(taint, now)
		switch {
		case !bounded:
		case !now.Before(at):
			d.block(ReasonTolerationExpired)
		case d.EvictAt.IsZero() || at.Before(d.EvictAt):
			d.EvictAt = at
		}
	}
}

// Verdict is what a Decision answers, in one byte: ShouldRun,
// ShouldContinueRunning and Reason, without EvictAt and without the node
// and instant Reasons reads. A caller that decides many nodes and reads the
// decisions later in the same pass keeps verdicts (and the few eviction
// instants) instead of Decisions, a byte instead of 80, and gets each
// Decision back with Policy.Recall.
type Verdict uint8

const (
	verdictRun      Verdict = 1 << 0
	verdictContinue Verdict = 1 << 1
	verdictShift            = 2 // Reason, in the bits above
)

// Every Reason fits in a Verdict's bits above verdictShift (a constant
// overflow does not compile).
const _ Verdict = Verdict(len(reasonNames)-1) << verdictShift

// Verdict returns d's verdict.
func (d Decision) Verdict() Verdict {
	v := Verdict(d.Reason) << verdictShift
	if d.ShouldRun {
		v |= verdictRun
	}
	if d.ShouldContinueRunning {
		v |= verdictContinue
	}
	return v
}

// Recall returns, without deciding again, the Decision that Decide(node,
// now) returned with verdict v and EvictAt evictAt: its answers, and node
// and now for Reasons. node must be the one given to Decide, unchanged
// since.
func (p *Policy) Recall(v Verdict, evictAt time.Time, node *schema.Node, now time.Time) Decision {
	return Decision{ShouldRun: v&verdictRun != 0, ShouldContinueRunning: v&verdictContinue != 0,
		EvictAt: evictAt, Reason: Reason(v >> verdictShift), policy: p, node: node, now: now}
}

// block records a "no" for reason r; the NoExecute reasons also stop a
// running instance.
func (d *Decision) block(r Reason) {
	d.ShouldRun = false
	evicts := r == ReasonUntoleratedNoExecute || r == ReasonTolerationExpired
	if evicts {
		d.ShouldContinueRunning = false
	}
	if d.Reason == ReasonNone || (evicts && d.Reason == ReasonUntoleratedNoSchedule) {
		d.Reason = r
	}
}
