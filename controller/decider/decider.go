// Package decider decides every node's desired state and every daemonset's
// rollout, incrementally: it keeps what its last decision was built on
// (each node's placement facts and status contribution, each daemonset's
// rollout tracker, when the clock alone changes something) and a decision
// recomputes only what the inputs set since the last one can change.
//
//   - A node's facts (model, presence, observed state, published state):
//     that node against every daemonset.
//   - A daemonset's placement or template: that daemonset against every
//     node. Its rollout strategy or state alone: its rollout step only.
//   - The clock reaching an instant a decision named (a toleration or an
//     offline grace running out, an instance becoming available, a
//     progress deadline): the nodes or daemonsets it concerns.
//
// Each decision runs three pure stages, each once per node it touches:
// place (reconcile.Planner.Place, its decisions kept in a reconcile.Kept),
// rollout step (rollout.Tracker.Step, over the daemonset's nodes), assemble
// (reconcile.Planner.Assemble, from the kept placement: Planner.Recall;
// a node only a rollout step touched is placed here, once). MarkAll
// makes the next decision a full one over every node and daemonset: the
// level-triggered safety net the controller runs periodically. Whatever
// the inputs, an incremental decision equals the full one (the property
// test holds the two side by side).
//
// The Decider does no I/O and reads no clock; it is not safe for
// concurrent use: one goroutine (the controller's reconcile loop) owns it.
package decider

import (
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

// DaemonSet is one daemonset as the decider sees it.
type DaemonSet struct {
	// Key is "namespace/name".
	Key string
	// Policy decides placement; a new Policy value (another pointer) is a
	// changed placement. Unused for an orphan.
	Policy reconcile.Placer
	// Revision is the hash of the current template.
	Revision        string
	MinReadySeconds int32
	Strategy        rollout.Strategy
	// Rollout is the persisted rollout state. SetDaemonSet takes it only
	// when it differs from the tracker's (an operator's pause, a stored
	// rollback): the decider's own decisions carry it otherwise.
	Rollout rollout.State
	// Orphan marks a daemonset deleted without cascading: its instances
	// stay as they are.
	Orphan bool
}

// Node is what the decider needs of one node.
type Node struct {
	Name string
	// Model is the effective node (registry.Effective); nil for a node
	// that is not registered: the operator deleted it, or the controller
	// knows its published state but has not heard from it since it
	// started. A deleted node (Deleted) gets an empty desired state once;
	// an unregistered one keeps what it has, untouched.
	Model *schema.Node
	// ModelChangeAt is when Model changes by itself (an offline grace
	// running out); zero if never.
	ModelChangeAt time.Time
	// Deleted marks a node the operator deleted.
	Deleted      bool
	Online       bool
	OfflineSince time.Time
	// Current is what was last published to the node; HasCurrent says
	// whether anything was.
	Current    reconcile.NodeDesired
	HasCurrent bool
	// Observed is what the node last reported it runs.
	Observed []schema.InstanceStatus
	// Prefetch is what the node last reported of its prefetches.
	Prefetch []schema.PrefetchStatus
}

// Decider holds the decision state of one fleet. Create it with New.
type Decider struct {
	ds      map[string]*daemonSet // by key
	slots   []*daemonSet          // by slot; nil where free
	nodes   map[string]*node
	configs reconcile.Configs

	dirty   map[string]bool // nodes to place and assemble again
	replace bool            // every node is dirty (a placement, template or config change)
	// replaced are the slots of the daemonsets whose placement changed:
	// every node is placed against them; against the others, only nodes
	// whose own facts changed.
	replaced map[int]bool
	full     bool // MarkAll: every node and every rollout from scratch
	requeue  requeueHeap
	now      time.Time          // of the decision under way
	planner  *reconcile.Planner // of the decision under way
	plannerK []int              // slot of each of planner's daemonsets
	scratch  reconcile.Placement
	// kept holds stage one's placements of this decision, for stage three.
	kept    reconcile.Kept
	result  reconcile.NodeResult
	assigns []map[string][]string // each planner daemonset's rollout step's moves, this decision
	asks    []map[string]string   // each planner daemonset's rollout step's prefetch asks, this decision
	// chunk is the fewest nodes one goroutine of stage three takes
	// (assembleChunk; tests make it small to run the split on small
	// fleets).
	chunk int
	// lists interns the instance lists of the desired states assembled.
	lists instanceLists
}

// daemonSet is one daemonset's decision state.
type daemonSet struct {
	DaemonSet
	slot    int
	tracker *rollout.Tracker // nil for an orphan
	// status sums every node's contribution (node.bits[slot]).
	status reconcile.DaemonSetStatus
	// last is the last rollout step's outcome; due is when the clock
	// alone changes it (zero if never); step asks for a step next time.
	last rollout.Delta
	due  time.Time
	step bool
}

// node is one node's decision state.
type node struct {
	Node
	// bits is the node's contribution to each daemonset's status, by slot;
	// member says, by slot, whether the node is one of the daemonset's
	// rollout nodes (it runs the daemonset).
	bits   []reconcile.StatusBits
	member []bool
	// next is when the clock alone changes the node's plan (zero if never).
	next time.Time
	// told is what the trackers were last told of the node, kept from the
	// first SetNode after a decision until the next one places the node:
	// a tracker whose daemonset's facts of the node did not change is not
	// told again. Nil: every tracker is told.
	told *Node
}

// New returns an empty Decider.
func New() *Decider {
	return &Decider{ds: map[string]*daemonSet{}, nodes: map[string]*node{}, dirty: map[string]bool{}, replaced: map[int]bool{}, chunk: assembleChunk,
		lists: newInstanceLists()}
}

// SetDaemonSet adds or replaces a daemonset. A new placement, template,
// minReadySeconds or orphan flag plans it against every node; a new
// strategy or rollout state alone only steps its rollout.
func (d *Decider) SetDaemonSet(in DaemonSet) {
	ds, ok := d.ds[in.Key]
	if !ok {
		ds = &daemonSet{DaemonSet: in, slot: d.freeSlot()}
		d.slots[ds.slot] = ds
		d.ds[in.Key] = ds
		if !in.Orphan {
			ds.tracker = rollout.NewTracker(in.Strategy, in.Rollout.Retarget(in.Revision))
		}
		d.replaceSlot(ds.slot)
		ds.step = true
		return
	}
	prev := ds.DaemonSet
	ds.DaemonSet = in
	if prev.Policy != in.Policy || prev.Revision != in.Revision || prev.MinReadySeconds != in.MinReadySeconds || prev.Orphan != in.Orphan {
		d.replaceSlot(ds.slot)
	}
	if in.Orphan {
		d.setTracker(ds, nil)
		return
	}
	if ds.tracker == nil {
		d.setTracker(ds, rollout.NewTracker(in.Strategy, in.Rollout.Retarget(in.Revision)))
		ds.step = true
		return
	}
	if !strategyEqual(prev.Strategy, in.Strategy) {
		if ds.tracker.SetStrategy(in.Strategy) {
			d.setTracker(ds, ds.tracker) // it reads other labels: tell it every node again
		}
		ds.step = true
	}
	st := ds.tracker.State()
	if want := in.Rollout.Retarget(in.Revision); !st.Equal(want) {
		ds.tracker.SetState(want)
		ds.step = true
	}
}

// setTracker replaces ds's tracker, which starts without nodes: every
// node is placed again and joins the new one.
func (d *Decider) setTracker(ds *daemonSet, t *rollout.Tracker) {
	ds.tracker = t
	for _, n := range d.nodes {
		if ds.slot < len(n.member) {
			n.member[ds.slot] = false
		}
	}
	d.replaceSlot(ds.slot)
}

// replaceSlot plans every node against the daemonset of slot.
func (d *Decider) replaceSlot(slot int) {
	d.replace = true
	d.replaced[slot] = true
}

// freeSlot returns an unused slot, growing the table when none is free.
func (d *Decider) freeSlot() int {
	for i, ds := range d.slots {
		if ds == nil {
			return i
		}
	}
	d.slots = append(d.slots, nil)
	return len(d.slots) - 1
}

// RemoveDaemonSet forgets a daemonset: its instances are removed from
// every node (as reconcile removes those of a daemonset it is not given).
func (d *Decider) RemoveDaemonSet(key string) {
	ds, ok := d.ds[key]
	if !ok {
		return
	}
	delete(d.ds, key)
	d.slots[ds.slot] = nil
	for _, n := range d.nodes {
		if ds.slot < len(n.bits) {
			n.bits[ds.slot], n.member[ds.slot] = 0, false
		}
	}
	d.replace = true
}

// SetNode replaces one node's facts. A node neither registered, deleted
// nor published to is forgotten.
func (d *Decider) SetNode(in Node) {
	n, ok := d.nodes[in.Name]
	if in.Model == nil && !in.HasCurrent {
		if ok {
			d.dropNode(n)
		}
		return
	}
	if !ok {
		n = &node{}
		d.nodes[in.Name] = n
	} else {
		in.Name = n.Name // the name the trackers and rollout states hold already: one string per node
	}
	if ok && !d.dirty[in.Name] && n.Model != nil {
		told := n.Node
		n.told = &told
	}
	n.Node = in
	d.dirty[in.Name] = true
}

// Commit records what was published to node: the desired state of the
// last decision with the generation the store assigned. The node's
// placement is what that decision made of it, so only its rollout facts
// change: the revisions it is assigned, in the trackers of the daemonsets
// whose instances changed. A node the decision took a daemonset from while
// it still counts among that daemonset's nodes (a rollout that withholds
// it) is placed again at the next decision.
func (d *Decider) Commit(name string, nd reconcile.NodeDesired) {
	n, ok := d.nodes[name]
	if !ok {
		return
	}
	old := n.Current
	n.Current, n.HasCurrent = nd, true
	if n.Model == nil {
		d.dirty[name] = true // deleted: forgotten at the next decision
		return
	}
	for slot, member := range n.member {
		ds := d.slots[slot]
		if !member || ds == nil || ds.tracker == nil {
			continue
		}
		have := instancesOf(nd.Instances, ds.Key)
		switch {
		case len(have) == 0:
			d.dirty[name] = true
		case slices.Equal(have, instancesOf(old.Instances, ds.Key)) && askOf(nd, ds.Key) == askOf(old, ds.Key):
			// Its rollout facts are what the tracker has.
		case ds.tracker.Set(rolloutNode(n, ds, have)):
			ds.step = true
		}
	}
}

// instancesOf returns the run of instances, sorted by daemonset, of
// daemonset key.
func instancesOf(instances []schema.DesiredInstance, key string) []schema.DesiredInstance {
	i, _ := slices.BinarySearchFunc(instances, key, func(in schema.DesiredInstance, key string) int {
		return strings.Compare(in.DaemonSet, key)
	})
	j := i
	for j < len(instances) && instances[j].DaemonSet == key {
		j++
	}
	return instances[i:j]
}

// Forget drops a deleted node whose empty desired state was published.
func (d *Decider) Forget(name string) {
	if n, ok := d.nodes[name]; ok {
		d.dropNode(n)
	}
}

// dropNode removes n and its contributions.
func (d *Decider) dropNode(n *node) {
	for slot, b := range n.bits {
		if ds := d.slots[slot]; ds != nil {
			ds.status.Sub(b)
		}
	}
	for slot, in := range n.member {
		if ds := d.slots[slot]; in && ds != nil && ds.tracker != nil {
			ds.tracker.Remove(n.Name)
			ds.step = true
		}
	}
	delete(d.nodes, n.Name)
	delete(d.dirty, n.Name)
}

// SetConfigs replaces what resolves the config objects of desired states.
// Any node may reference a changed object: every node is assembled again.
func (d *Decider) SetConfigs(c reconcile.Configs) {
	d.configs = c
	d.replace = true
}

// MarkAll makes the next decision a full one: every node placed and
// assembled, every rollout stepped over all its nodes.
func (d *Decider) MarkAll() { d.full = true }

// Pending reports whether inputs set since the last decision wait for one.
func (d *Decider) Pending() bool {
	if d.full || d.replace || len(d.dirty) > 0 {
		return true
	}
	for _, ds := range d.ds {
		if ds.step {
			return true
		}
	}
	return false
}

// Status is one daemonset's status: the Kubernetes counts and its rollout.
type Status struct {
	reconcile.DaemonSetStatus
	Rollout rollout.Status
}

// Status returns the status of every daemonset that is not an orphan, as
// of the last decision.
func (d *Decider) Status() map[string]Status {
	out := make(map[string]Status, len(d.ds))
	for key, ds := range d.ds {
		if ds.Orphan {
			continue
		}
		st := ds.status
		st.NumberUnavailable = max(st.DesiredNumberScheduled-st.NumberAvailable, 0)
		out[key] = Status{DaemonSetStatus: st, Rollout: ds.last.Status}
	}
	return out
}

func strategyEqual(a, b rollout.Strategy) bool {
	return a.OnDelete == b.OnDelete && a.MaxUnavailable == b.MaxUnavailable && a.MaxSurge == b.MaxSurge &&
		a.MinReady == b.MinReady && a.OfflineGrace == b.OfflineGrace && a.ProgressDeadline == b.ProgressDeadline &&
		ptrEqual(a.FailureThreshold, b.FailureThreshold) && a.AutoRollback == b.AutoRollback && a.Paused == b.Paused &&
		ptrEqual(a.CanaryNodes, b.CanaryNodes) && a.CanaryAutoPromote == b.CanaryAutoPromote &&
		a.UpdateLockStaleAfter == b.UpdateLockStaleAfter && rollout.ScheduleEqual(a, b)
}

func ptrEqual[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}
