// Package reconcile computes, as a pure function, what every node's desired
// state should be: Plan takes a snapshot of the fleet (effective nodes,
// compiled daemonsets, what was last published to each node, what each node
// reports it runs, who is online) and returns only what must change, with
// the events to record, the daemonsets' status and when to plan again.
//
// Plan does no I/O, reads no clock and logs nothing; the controller's loop
// publishes and stores its Output. It is level-triggered: planning again
// over the state that results from applying an Output changes nothing.
//
// Plan is built from a Planner, its per-node form, in stages a caller can
// also run for one node at a time: Place (which daemonsets the node runs),
// the caller's choice of revisions (the rollout step), Assemble (the
// node's desired state, changes, status bits and requeue instant), and
// Deleted for a node that is gone.
package reconcile

import (
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

// Placer decides whether a daemonset runs on a node, and gives a decision
// back from its verdict: for d := Decide(n, t), Recall(d.Verdict(),
// d.EvictAt, n, t) must equal d (placement.Policy.Recall). *placement.Policy
// implements it.
type Placer interface {
	Decide(node *schema.Node, now time.Time) placement.Decision
	Recall(v placement.Verdict, evictAt time.Time, node *schema.Node, now time.Time) placement.Decision
}

var _ Placer = (*placement.Policy)(nil)

// RevisionFunc is the rollout seam: given a node that is to run a daemonset
// and the instances of that daemonset the node was last asked to run (have,
// sorted by revision, empty for a node that had none), it returns the
// revisions the node is to run now. One revision is the rule; two are a
// surge pair; none withholds the daemonset from the node for now. Plan
// copies, sorts and deduplicates the result; the function must neither
// modify have nor keep it.
type RevisionFunc func(node string, have []schema.DesiredInstance) []string

// DaemonSetState is one daemonset as Plan sees it.
type DaemonSetState struct {
	// Key is "namespace/name", unique among Input.DaemonSets.
	Key string
	// Policy decides placement. It must be set unless Orphan is.
	Policy Placer
	// CurrentRevision is the hash of the daemonset's current template (see
	// schema.TemplateHash). It must be set unless Orphan is.
	CurrentRevision string
	// MinReadySeconds is how long an instance must have been ready to count
	// as available, as spec.minReadySeconds.
	MinReadySeconds int32
	// Orphan marks a daemonset deleted without cascading (Kubernetes'
	// --cascade=orphan): the controller stops managing it but the devices
	// keep running it. Plan freezes its instances in the desired state of
	// the nodes that have them (same revisions, never added to another node,
	// never removed), and reports no status for it. Dropping the daemonset
	// from Input.DaemonSets afterwards removes those instances everywhere.
	Orphan bool
	// Revisions chooses the revisions of the nodes that run the daemonset.
	// Nil means every such node runs CurrentRevision at once; the rollout
	// package supplies one that paces an update.
	Revisions RevisionFunc
	// UpdateLockOverride, when set, gives for a node the override of an
	// update lock (schema.DesiredInstance.OverrideUpdateLock) an operator
	// allowed there, "" for none. It is attached to the instances a node
	// is newly asked to run; those it already runs keep theirs.
	UpdateLockOverride func(node string) string
}

// NodeDesired is a node's desired state as published: the generation, the
// instances, sorted by daemonset and then revision, and the config objects
// they reference (see Configs). Its slices are read-only: nodes that run
// the same instances may share them (the decider interns them).
type NodeDesired struct {
	Generation uint64                   `json:"generation"`
	Instances  []schema.DesiredInstance `json:"instances"`
	ConfigMaps []schema.ObjectRef       `json:"configMaps,omitempty"`
	Secrets    []schema.ObjectRef       `json:"secrets,omitempty"`
	// Prefetch lists the revisions the node is to download before it
	// switches (schema.DesiredState.Prefetch), sorted by daemonset.
	Prefetch []schema.DesiredInstance `json:"prefetch,omitempty"`
}

// Configs is what Plan needs to list the config objects of a node's
// desired state: for the instances the node is to run, the ConfigMaps and
// Secrets their revisions reference (by name, in the daemonset's
// namespace) that exist, each at its current hash.
type Configs struct {
	// Refs are the references of each revision's template, by revision
	// hash (schema.PodTemplateSpec.References). A revision absent here
	// references nothing.
	Refs map[string]schema.ConfigRefs
	// ConfigMaps and Secrets map the "namespace/name" of every existing
	// object to its content hash. A referenced object absent here does
	// not exist and is left out of the desired state.
	ConfigMaps map[string]string
	Secrets    map[string]string
}

// Input is the snapshot Plan decides on. Plan does not modify it.
type Input struct {
	// Now is the instant the decisions are taken at.
	Now time.Time
	// Nodes are the effective models of the registered nodes (see
	// registry.Snapshot), with unique names. Plan sorts a copy if they are
	// not sorted by name.
	Nodes []schema.Node
	// NodesChangeAt is when a node's effective model will next change by
	// itself (registry.Snapshot's second result); zero if never.
	NodesChangeAt time.Time
	// DaemonSets are the daemonsets that exist, in any order. An instance
	// of a daemonset not listed is removed from every node.
	DaemonSets []DaemonSetState
	// Current is what was last published to each node. A node of Nodes
	// absent here has never been published to.
	Current map[string]NodeDesired
	// Observed is what each node last reported it runs.
	Observed map[string]schema.ObservedState
	// Online tells which nodes are connected; a node absent is offline.
	Online map[string]bool
	// Configs resolves the config objects of the instances placed.
	Configs Configs
}

// Event reasons Plan sets besides the placement.Reason names of removals
// (NodeSelectorMismatch, UntoleratedNoExecuteTaint, TolerationExpired, …).
const (
	// ReasonScheduled: the node was asked to run the daemonset.
	ReasonScheduled = "Scheduled"
	// ReasonUpdated: the node was asked to run other revisions.
	ReasonUpdated = "Updated"
	// ReasonDaemonSetDeleted: the daemonset no longer exists.
	ReasonDaemonSetDeleted = "DaemonSetDeleted"
	// ReasonNodeDeleted: the node no longer exists.
	ReasonNodeDeleted = "NodeDeleted"
	// ReasonWithheld: the daemonset's RevisionFunc returned no revision.
	ReasonWithheld = "WithheldByRollout"
)

// Change is one event-worthy change of one node's desired state.
type Change struct {
	Node      string
	DaemonSet string
	// Revision is the revision placed (the first of a surge pair) for
	// Scheduled and Updated, the one removed otherwise.
	Revision string
	// Reason is a CamelCase reason, one of the Reason constants or a
	// placement.Reason name.
	Reason string
	// Message says why in words; empty for Scheduled.
	Message string
}

// DaemonSetStatus mirrors the Kubernetes DaemonSet status, counted over
// the desired state Plan returns (a node "runs" a daemonset when its desired
// state has an instance of it) and the observed state, plus edgeset's count
// of offline nodes.
type DaemonSetStatus struct {
	// DesiredNumberScheduled counts the nodes that should run the daemonset
	// (placement's ShouldRun).
	DesiredNumberScheduled int `json:"desiredNumberScheduled"`
	// CurrentNumberScheduled counts those that run it.
	CurrentNumberScheduled int `json:"currentNumberScheduled"`
	// NumberMisscheduled counts nodes that run it but should not, such as
	// a node that kept its instance behind an untolerated NoSchedule taint.
	NumberMisscheduled int `json:"numberMisscheduled"`
	// NumberReady counts nodes that should run it, run it, are online and
	// report an instance of it ready.
	NumberReady int `json:"numberReady"`
	// NumberAvailable counts the ready ones whose instance has been ready
	// for MinReadySeconds.
	NumberAvailable int `json:"numberAvailable"`
	// UpdatedNumberScheduled counts nodes that should run it, run it, and
	// report an instance of CurrentRevision.
	UpdatedNumberScheduled int `json:"updatedNumberScheduled"`
	// NumberUnavailable is DesiredNumberScheduled - NumberAvailable.
	NumberUnavailable int `json:"numberUnavailable"`
	// NodesOffline counts the nodes that should run it and are offline.
	NodesOffline int `json:"nodesOffline"`
}

// Output is what Plan decided.
type Output struct {
	// Desired holds the nodes whose desired state changed (or that were
	// never published to), each with the generation of the last published
	// state plus one. Instances is never nil. A change of the config
	// objects a node's instances reference (another hash, one appearing or
	// disappearing) is a change of its desired state.
	Desired map[string]NodeDesired
	// Forget lists deleted nodes whose empty desired state was already
	// published: the caller drops them from Current. Sorted.
	Forget []string
	// Scheduled, Updated, Unscheduled and Evicted are the changes, for
	// events. Evicted holds removals for untolerated (or no longer
	// tolerated) NoExecute taints; Unscheduled every other removal.
	Scheduled   []Change
	Updated     []Change
	Unscheduled []Change
	Evicted     []Change
	// RequeueAt is the earliest instant after Now at which planning again
	// may change something by the clock alone: a NoExecute toleration that
	// runs out, a node whose offline grace expires (Input.NodesChangeAt),
	// or an instance that becomes available. Zero if none.
	RequeueAt time.Time
	// Status is the status of every daemonset that is not an orphan.
	Status map[string]DaemonSetStatus
}
