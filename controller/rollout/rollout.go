// Package rollout decides, for one daemonset, which revision each eligible
// node runs while a new revision rolls out: RollingUpdate with
// maxUnavailable, maxSurge and minReadySeconds as in Kubernetes, OnDelete,
// and edgeset's extensions for fleets with unreliable links (offline nodes
// neither stall nor escape a rollout, progress deadlines, a failure
// threshold with automatic rollback, pause, canary, per-site budgets,
// maintenance windows and device-side update locks).
//
// Step is a pure function of (strategy, persisted state, node facts, now):
// no I/O, no clock, no logger. The controller persists the returned State and
// publishes the returned assignments. A Tracker is Step's incremental form
// for one daemonset: it holds the nodes and the state, and recomputes only
// the nodes that changed (or whose deadlines the clock reached), returning
// what Step over every node returns.
package rollout

import (
	"maps"
	"time"

	"github.com/edgeset/edgeset/controller/rollout/window"
	"github.com/edgeset/edgeset/schema"
)

// Strategy is a daemonset's update strategy, resolved from its spec.
type Strategy struct {
	// OnDelete moves a node to the target only when its instance is gone.
	OnDelete       bool
	MaxUnavailable schema.IntOrString
	MaxSurge       schema.IntOrString
	MinReady       time.Duration
	// OfflineGrace: a node offline longer than this is left out of the
	// budget and updated when it returns. Zero leaves no node out.
	OfflineGrace time.Duration
	// ProgressDeadline: an instance not available this long after its node
	// was assigned the target has failed. Zero disables it.
	ProgressDeadline time.Duration
	// FailureThreshold, when set, pauses the rollout once this many (or this
	// percentage) of the nodes assigned the target have failed.
	FailureThreshold *schema.IntOrString
	AutoRollback     bool
	Paused           bool
	// CanaryNodes, when set, updates this many (or this percentage) of the
	// nodes first, then waits for promotion.
	CanaryNodes *schema.IntOrString
	// CanaryAutoPromote promotes once the canary nodes have all been
	// available this long; zero waits for an explicit promotion.
	CanaryAutoPromote time.Duration
	// Topology, when set, bounds how many nodes of each topology domain
	// (a site) are updated at once, on top of MaxUnavailable.
	Topology *TopologyBudget
	// Windows, when set, confine the switch of a node to a new revision to
	// the times a window that selects it is open (at most
	// schema.MaxMaintenanceWindows; the rest are ignored).
	Windows []window.Window
	// UpdateLockStaleAfter: an update lock held longer than this is
	// reported stale (State.StaleLocks, ReasonUpdateLockStale), and an
	// operator may override it. Zero: never stale.
	UpdateLockStaleAfter time.Duration
	// Prefetch, when set, has every node download the target's images
	// before it switches (prefetch.go).
	Prefetch *Prefetch
}

// TopologyBudget is spec.rollout.maxUnavailablePerTopology resolved: the
// nodes sharing a value of the label Key form a domain, and at most
// MaxUnavailable of a domain's nodes (a count, or a percentage of them
// rounded up) are unavailable at once through the rollout, or, with
// maxSurge, hold a surge pair. Nodes without the label form one domain.
type TopologyBudget struct {
	Key            string
	MaxUnavailable schema.IntOrString
}

// FromSpec resolves a daemonset's strategy, with Kubernetes' defaults
// (maxUnavailable 1, maxSurge 0) and edgeset's offline grace default.
func FromSpec(spec *schema.DaemonSetSpec, defaultOfflineGrace time.Duration) Strategy {
	s := Strategy{
		MaxUnavailable: schema.FromInt(1),
		MinReady:       time.Duration(spec.MinReadySeconds) * time.Second,
		OfflineGrace:   defaultOfflineGrace,

		UpdateLockStaleAfter: schema.DefaultUpdateLockStaleAfter,
	}
	u := spec.UpdateStrategy
	s.OnDelete = u.Type == schema.OnDeleteStrategy
	if ru := u.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			s.MaxUnavailable = *ru.MaxUnavailable
		}
		if ru.MaxSurge != nil {
			s.MaxSurge = *ru.MaxSurge
		}
	}
	if r := spec.Rollout; r != nil {
		applyPolicy(&s, r)
	}
	return s
}

func applyPolicy(s *Strategy, r *schema.RolloutPolicy) {
	if r.OfflineGraceSeconds != nil {
		s.OfflineGrace = time.Duration(*r.OfflineGraceSeconds) * time.Second
	}
	if r.ProgressDeadlineSeconds != nil {
		s.ProgressDeadline = time.Duration(*r.ProgressDeadlineSeconds) * time.Second
	}
	if r.UpdateLockStaleAfterSeconds != nil {
		s.UpdateLockStaleAfter = time.Duration(*r.UpdateLockStaleAfterSeconds) * time.Second
	}
	s.FailureThreshold = r.FailureThreshold
	s.AutoRollback = r.AutoRollback
	s.Paused = r.Paused
	if c := r.Canary; c != nil && c.Nodes != nil {
		s.CanaryNodes = c.Nodes
		s.CanaryAutoPromote = time.Duration(c.AutoPromoteSeconds) * time.Second
	}
	if b := r.MaxUnavailablePerTopology; b != nil && b.TopologyKey != "" {
		s.Topology = &TopologyBudget{Key: b.TopologyKey, MaxUnavailable: schema.FromInt(1)}
		if b.MaxUnavailable != nil {
			s.Topology.MaxUnavailable = *b.MaxUnavailable
		}
	}
	for i, spec := range r.MaintenanceWindows {
		if i == schema.MaxMaintenanceWindows {
			break
		}
		// A stored spec was validated; one that fails anyway is a
		// window that never opens, not a node updated at any time.
		w, _ := window.New(spec)
		s.Windows = append(s.Windows, w)
	}
	s.Prefetch = prefetchFromSpec(r)
}

// Instance is what a node reports for one revision of the daemonset.
type Instance struct {
	Revision   string
	Ready      bool
	ReadySince time.Time
	Phase      string
	Message    string
	// LockedSince is when the instance's update lock was taken, as its
	// agent reports it; zero while the lock is not held. LockDeferred:
	// the agent deferred replacing the instance because of the lock, and
	// waits for a new assignment before it acts again
	// (schema.UpdateLockStatus).
	LockedSince  time.Time
	LockDeferred bool
}

// Node is one node that should run the daemonset, as the controller sees it.
type Node struct {
	Name   string
	Online bool
	// OfflineSince is when the node disconnected (zero while online).
	OfflineSince time.Time
	// Assigned are the revisions the node is currently asked to run (none,
	// one, or a surge pair).
	Assigned []string
	// Observed are the instances the node reports for this daemonset.
	Observed []Instance
	// Labels are the node's labels: what the strategy's topology key and
	// windows' node selectors read (Step and Tracker keep no reference).
	Labels map[string]string
	// CanPrefetch: the node's agent prefetches (it announces
	// schema.LabelPrefetch). One that does not switches without.
	CanPrefetch bool
	// Prefetching is the revision the node is asked to prefetch, as
	// published ("" for none).
	Prefetching string
	// Prefetched are the revisions whose images the node reports present
	// (its finished prefetches).
	Prefetched []string

	// resolved: a Tracker filled domain, domainID and windows from the
	// labels it was Set with; Step reads Labels otherwise.
	resolved bool
	domain   string
	domainID uint32
	windows  uint16
	// pfDomain and pfDomainID: the node's prefetch domain, resolved by a
	// Tracker.
	pfDomain   string
	pfDomainID uint32
}

// State is the persisted progress of a daemonset's rollout. It is stored
// as JSON in the shape of stateJSON (progress.go). Its maps are shared by
// its copies: a copy to keep is a clone (Tracker.State says when).
type State struct {
	// Target is the revision being rolled out.
	Target string
	// Stable is the last revision that reached every reachable node; it is
	// what a rollback rolls out.
	Stable string
	// Previous is the stable revision before Stable: what a rollback rolls
	// out when the failing target itself completed first (an instance that
	// flickers ready between crashes can complete a rollout).
	Previous string
	// Failed holds the nodes whose Target instance failed, with why.
	Failed map[string]string
	// progress holds the nodes assigned Target by this rollout, each with
	// when (AssignedAt), and whether its instance was not available at the
	// last pass within its progress window, with its phase and message
	// (PendingMessage). The window of a node runs from its assignment for
	// ProgressDeadline, or, with no deadline, until its instance is first
	// available; only what happens within it counts against the failure
	// threshold.
	progress map[string]progress
	// Away holds the nodes that disconnected within their progress window:
	// the window starts again when they return.
	Away map[string]bool
	// Paused stops new batches after a crossed failure threshold;
	// PauseReason says why.
	Paused      bool
	PauseReason string
	// OperatorPaused is `rollout pause`: it stops new batches until resumed,
	// across new revisions.
	OperatorPaused bool
	// RolledBackFrom is the revision abandoned by an automatic rollback;
	// RollbackReason says why (the failure threshold it crossed).
	RolledBackFrom string
	RollbackReason string
	// CanaryPromoted lets the rollout go past its canary nodes.
	CanaryPromoted bool
	// CanaryAvailableSince is when every canary node became available.
	CanaryAvailableSince time.Time
	// Complete: Target reached every reachable node.
	Complete bool
	// StaleLocks holds the nodes whose update lock, on an instance the
	// rollout would replace, has been held longer than the strategy's
	// UpdateLockStaleAfter, each with when it was taken (an event said so
	// once per lock).
	StaleLocks map[string]time.Time
	// LockOverrides holds the nodes whose stale lock an operator
	// overrode, each with when that lock was taken: such a node moves
	// under the budget as if the lock were free, and its agent is told to
	// break a lock taken then or before. A lock taken later holds again.
	LockOverrides map[string]time.Time
}

// Retarget starts rolling out target. The stable revision (the last one
// that completed) stays what a rollback returns to, and an operator's pause
// holds. Retargeting to the current target changes nothing.
func (st State) Retarget(target string) State {
	if st.Target == target {
		return st
	}
	return State{Target: target, Stable: st.Stable, Previous: st.Previous, OperatorPaused: st.OperatorPaused}
}

// Equal reports whether st and o are the same state: a nil map is equal
// to an empty one, and instants are equal whatever their location. The
// maps grow with the fleet, so their lengths are compared first.
func (st State) Equal(o State) bool {
	if len(st.progress) != len(o.progress) || len(st.Failed) != len(o.Failed) || len(st.Away) != len(o.Away) ||
		len(st.StaleLocks) != len(o.StaleLocks) || len(st.LockOverrides) != len(o.LockOverrides) {
		return false
	}
	return scalarsEqual(st, o) && maps.Equal(st.progress, o.progress) && maps.Equal(st.Failed, o.Failed) &&
		maps.Equal(st.Away, o.Away) && maps.EqualFunc(st.StaleLocks, o.StaleLocks, time.Time.Equal) &&
		maps.EqualFunc(st.LockOverrides, o.LockOverrides, time.Time.Equal)
}

// Phase summarises where each node stands.
type Phase string

// Node phases in a rollout.
const (
	PhaseUpdated  Phase = "Updated"  // runs the target, available
	PhaseUpdating Phase = "Updating" // assigned the target, not yet available
	PhaseWaiting  Phase = "Waiting"  // still on an older revision
	PhaseOffline  Phase = "Offline"  // offline past the grace period, waiting for its return
	PhaseFailed   Phase = "Failed"   // target instance failed

	// PhaseWaitingForWindow: on an older revision, and no maintenance
	// window that selects it is open. Not failed, and no deadline runs.
	PhaseWaitingForWindow Phase = "WaitingForWindow"
	// PhaseHeldByLock: on an older revision whose instance holds its
	// update lock (not overridden): the rollout passes it over, spending
	// no budget on it, until the lock is released. Not failed, and no
	// deadline runs.
	PhaseHeldByLock Phase = "HeldByLock"
	// PhaseWaitingForPrefetch: on an older revision, serving, and its
	// download of the target's images is not done (spec.rollout.prefetch).
	// Not failed, and no deadline runs.
	PhaseWaitingForPrefetch Phase = "WaitingForPrefetch"
)

// Status counts nodes by phase.
type Status struct {
	Target         string `json:"target"`
	Total          int    `json:"total"`
	Updated        int    `json:"updated"`
	Updating       int    `json:"updating"`
	Waiting        int    `json:"waiting"`
	Offline        int    `json:"offline"`
	Failed         int    `json:"failed"`
	Unavailable    int    `json:"unavailable"`
	MaxUnavailable int    `json:"maxUnavailable"`
	// Complete: every reachable node runs the target, available.
	Complete    bool   `json:"complete"`
	Paused      bool   `json:"paused"`
	PauseReason string `json:"pauseReason,omitempty"`
	// RolledBack is set while an automatic rollback is under way or done.
	RolledBack     bool   `json:"rolledBack"`
	RolledBackFrom string `json:"rolledBackFrom,omitempty"`
	RollbackReason string `json:"rollbackReason,omitempty"`
	// CanaryWaiting: the canary nodes are done and the rollout waits for
	// promotion.
	CanaryWaiting bool `json:"canaryWaiting"`
	// WaitingForWindow counts the nodes on an older revision whose
	// maintenance windows are all closed; NextWindow is when the first of
	// their windows opens (zero when none of them ever does, or no node
	// waits for one).
	WaitingForWindow int       `json:"waitingForWindow,omitempty"`
	NextWindow       time.Time `json:"nextWindow,omitzero"`
	// HeldByLock counts the nodes in PhaseHeldByLock; StaleLocks the nodes
	// whose lock is stale (State.StaleLocks), whatever their phase.
	HeldByLock int `json:"heldByLock,omitempty"`
	StaleLocks int `json:"staleLocks,omitempty"`
	// WaitingForPrefetch counts the nodes in PhaseWaitingForPrefetch;
	// Prefetch counts the downloads (zero without spec.rollout.prefetch).
	WaitingForPrefetch int            `json:"waitingForPrefetch,omitempty"`
	Prefetch           PrefetchCounts `json:"prefetch,omitzero"`
}

// Event reasons emitted by Step.
const (
	ReasonInstanceFailed = "RolloutInstanceFailed"
	ReasonPaused         = "RolloutPaused"
	ReasonRollback       = "RolloutRollback"
	ReasonComplete       = "RolloutComplete"
	ReasonCanaryWaiting  = "RolloutCanaryWaiting"
	// ReasonUpdateLockStale: a node's update lock has been held longer
	// than the strategy allows (once per lock).
	ReasonUpdateLockStale = "RolloutUpdateLockStale"
)

// Event is something an operator should hear about.
type Event struct {
	Reason  string
	Node    string
	Message string
	Warning bool
}

// Decision is Step's result.
type Decision struct {
	// Assign gives, for every node passed in, the revisions it must run,
	// sorted (at most two: a surge pair).
	Assign map[string][]string
	// Prefetch gives, for every node passed in that is to prefetch, the
	// revision (the target); a node absent prefetches nothing.
	Prefetch map[string]string
	State    State
	Status   Status
	Events   []Event
	// RequeueAt is the earliest time the decision may change with no new
	// input (a minReadySeconds or deadline expiring); zero if none.
	RequeueAt time.Time
}
