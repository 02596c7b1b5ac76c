package reconcile

import (
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

// Planner is Plan's per-node form: compiled once for one set of daemonsets,
// config objects and instant, it holds no node state, so one Planner serves
// any number of nodes, one at a time. A node is planned in two pure stages
// with a caller's step between them:
//
//  1. Place decides, per daemonset, whether the node runs it and what it
//     was last asked to run.
//  2. The caller picks the revisions of each daemonset the node runs (the
//     rollout step, which may need every node's placement first: Kept
//     keeps the placements' decisions, Recall gives a Placement back
//     without deciding again).
//  3. Assemble builds the node's desired state from those revisions, with
//     its changes, its status contribution and its requeue instant.
//
// Plan is exactly this over every node, summed. A Planner is not safe for
// concurrent use: it reuses scratch space from node to node, so the steady
// state (nothing changes) allocates nothing per node; Fork gives each
// goroutine its own.
type Planner struct {
	now     time.Time
	ds      []DaemonSetState // sorted by Key, unique
	index   map[string]int   // Key to position in ds
	current []string         // CurrentRevision of each daemonset, for one-element slices
	configs Configs

	instances []schema.DesiredInstance // the node's new instances
	revisions []string                 // one daemonset's revisions
	observed  []schema.InstanceStatus  // the node's observed instances
	obsDS     []int                    // position in ds of each observed instance, -1 if none
	obsFirst  []int                    // per daemonset, its first observed instance, -1 if none
	obsNext   []int                    // per observed instance, the next of its daemonset, -1 if none
	cms       []schema.ObjectRef       // the node's ConfigMaps
	secrets   []schema.ObjectRef       // the node's Secrets
	prefetch  []schema.DesiredInstance // the node's prefetch asks
	objects   []schema.DesiredInstance // instances and prefetch asks, whose config objects the node gets
}

// NewPlanner compiles daemonsets (in any order; of two with one Key the
// first is kept) and configs for planning nodes at now. It does not modify
// daemonsets and keeps configs' maps, which the caller must not modify
// while it uses the Planner. It panics if a daemonset that is not an orphan
// has no Policy.
func NewPlanner(now time.Time, daemonsets []DaemonSetState, configs Configs) *Planner {
	ds := slices.Clone(daemonsets)
	slices.SortStableFunc(ds, func(a, b DaemonSetState) int { return strings.Compare(a.Key, b.Key) })
	ds = slices.CompactFunc(ds, func(a, b DaemonSetState) bool { return a.Key == b.Key })
	p := &Planner{
		now:     now,
		ds:      ds,
		index:   make(map[string]int, len(ds)),
		current: make([]string, len(ds)),
		configs: configs,
	}
	for k := range ds {
		if !ds[k].Orphan && ds[k].Policy == nil {
			panic("reconcile: daemonset " + ds[k].Key + " has no placement policy")
		}
		p.index[ds[k].Key] = k
		p.current[k] = ds[k].CurrentRevision
	}
	return p
}

// Fork returns a Planner for the same daemonsets, config objects and
// instant with scratch space of its own: a Planner and its forks may plan
// nodes concurrently, one goroutine each.
func (p *Planner) Fork() *Planner {
	return &Planner{now: p.now, ds: p.ds, index: p.index, current: p.current, configs: p.configs}
}

// DaemonSets returns the Planner's daemonsets, sorted by Key and unique:
// the position of a daemonset here is the index k of Placement.DaemonSets,
// NodeResult.Status and the revision function of Assemble. The caller must
// not modify it.
func (p *Planner) DaemonSets() []DaemonSetState { return p.ds }

// Index returns the position of the daemonset key in DaemonSets.
func (p *Planner) Index(key string) (int, bool) {
	k, ok := p.index[key]
	return k, ok
}

// CurrentRevision returns a one-element slice holding the CurrentRevision
// of daemonset k, shared: a revision function may return it (it must not
// be modified) to run the current template without allocating.
func (p *Planner) CurrentRevision(k int) []string { return p.current[k : k+1 : k+1] }

// Placement is stage one's result for one node: what Place decided, read by
// Assemble and by the caller's rollout step. Place reuses its slices, so a
// Placement is valid until the next Place into it, and it refers to the
// node and current state given to Place, which must not change meanwhile.
// A caller that needs every node's placement before assembling any (a
// fleet-wide rollout step) keeps its decisions in a Kept (a byte per
// daemonset) and rebuilds the Placement with Recall before Assemble,
// rather than one Placement per node (136 bytes per daemonset on amd64).
type Placement struct {
	// DaemonSets holds, at index k, the placement of Planner.DaemonSets()[k].
	DaemonSets []DaemonSetPlacement

	node    string
	cur     NodeDesired
	sorted  []schema.DesiredInstance // cur.Instances sorted, when they are not
	deleted []schema.DesiredInstance // instances of deleted daemonsets after the last one
}

// DaemonSetPlacement is the placement of one daemonset on one node.
type DaemonSetPlacement struct {
	// Decision is placement's decision; zero for an orphan.
	Decision placement.Decision
	// Runs tells whether the node is to run the daemonset: placement says
	// ShouldRun, or the node already runs it (Have is not empty) and
	// placement says ShouldContinueRunning. An orphan runs where Have is
	// not empty.
	Runs bool
	// Have holds the instances of the daemonset the node was last asked to
	// run, sorted (duplicates kept as published); empty for none. It
	// aliases the current state given to Place (or the Placement's sorted
	// copy of it) and must not be modified.
	Have []schema.DesiredInstance

	deleted []schema.DesiredInstance // instances of deleted daemonsets sorted just before this one
}

// Place (stage one) decides, for each daemonset, whether node runs it given
// cur, the node's current desired state (the zero NodeDesired for a node
// never published to), and writes the decisions into pl. It keeps node and
// cur in pl for Assemble, and allocates nothing once pl's slices have
// grown (an unsorted cur is sorted into pl's scratch).
func (p *Planner) Place(node *schema.Node, cur NodeDesired, pl *Placement) {
	p.place(node, cur, pl, nil, 0)
}

// Recall rebuilds into pl the Placement that Place wrote for node and cur
// when row of kept kept it, without deciding again: the decisions come
// back from their verdicts (placement.Policy.Recall), only the current
// state is split again. node and cur must be those given to Place,
// unchanged, and p the Planner that placed them or a Fork of it.
func (p *Planner) Recall(node *schema.Node, cur NodeDesired, kept *Kept, row int, pl *Placement) {
	if kept.width != len(p.ds) {
		panic("reconcile: Recall from a Kept of another Planner's daemonsets")
	}
	p.place(node, cur, pl, kept, row)
}

// place is Place, or Recall when kept is not nil.
func (p *Planner) place(node *schema.Node, cur NodeDesired, pl *Placement, kept *Kept, row int) {
	pl.node, pl.cur = node.Name, cur
	pl.DaemonSets = slices.Grow(pl.DaemonSets[:0], len(p.ds))[:len(p.ds)]
	rest := cur.Instances
	if !instancesSorted(rest) {
		pl.sorted = append(pl.sorted[:0], rest...)
		slices.SortFunc(pl.sorted, compareInstances)
		rest = pl.sorted
	}
	for k := range p.ds {
		ds, d := &p.ds[k], &pl.DaemonSets[k]
		d.deleted, rest = splitBefore(rest, ds.Key)
		d.Have, rest = splitRun(rest, ds.Key)
		if ds.Orphan {
			d.Decision, d.Runs = placement.Decision{}, len(d.Have) > 0
			continue
		}
		if kept == nil {
			d.Decision = ds.Policy.Decide(node, p.now)
		} else {
			v, evictAt := kept.at(row, k)
			d.Decision = ds.Policy.Recall(v, evictAt, node, p.now)
		}
		d.Runs = d.Decision.ShouldRun || len(d.Have) > 0 && d.Decision.ShouldContinueRunning
	}
	pl.deleted = rest
}

// splitBefore splits sorted instances into those of daemonsets before key
// and the rest.
func splitBefore(instances []schema.DesiredInstance, key string) (before, rest []schema.DesiredInstance) {
	i := 0
	for i < len(instances) && instances[i].DaemonSet < key {
		i++
	}
	return instances[:i:i], instances[i:]
}

// splitRun splits sorted instances, the first of which are not before key,
// into those of daemonset key (capacity clipped) and the rest.
func splitRun(instances []schema.DesiredInstance, key string) (run, rest []schema.DesiredInstance) {
	n := 0
	for n < len(instances) && instances[n].DaemonSet == key {
		n++
	}
	return instances[:n:n], instances[n:]
}

// NodeResult is stage three's result for one node. Assemble reuses its
// slices (the changes and Status) for the next node; Desired's slices are
// fresh when Changed and the current state's otherwise, never scratch.
type NodeResult struct {
	// Desired is the node's new desired state: when Changed, the generation
	// of the current state plus one, Instances never nil; otherwise the
	// current state itself.
	Desired NodeDesired
	// Changed tells whether Desired is to be published: its instances or
	// config objects differ from the current state's, or the node was
	// never published to.
	Changed bool
	// Scheduled, Updated, Unscheduled and Evicted are the node's changes,
	// as Output's, each sorted by daemonset.
	Scheduled   []Change
	Updated     []Change
	Unscheduled []Change
	Evicted     []Change
	// Status holds, at index k, the node's contribution to the status of
	// Planner.DaemonSets()[k]; zero for an orphan.
	Status []StatusBits
	// RequeueAt is the earliest instant after the Planner's instant at
	// which the clock alone changes this node's plan (a toleration that
	// runs out, an instance that becomes available); zero if none.
	RequeueAt time.Time

	// accumulate, set by Plan only, keeps the changes of the nodes
	// assembled before, so the fleet's changes are appended once, in
	// place, instead of copied node by node.
	accumulate bool
}

// Assemble (stage three) builds into out the desired state of the node
// that this Planner's Place put in pl. had tells whether the node's
// current state was ever published (a node that was not is always
// Changed). For each daemonset k the node runs (Runs) that is not an
// orphan, revs(k) gives the revisions it is to run: one as a rule, two for
// a surge pair, none to withhold it for now. Assemble copies, sorts and
// deduplicates the result, so revs may return a shared slice such as
// CurrentRevision(k). A nil revs runs CurrentRevision everywhere. Orphans
// keep the instances they had. observed are the instances the node
// reports (sorted by daemonset, as agents send them, is fastest) and
// online its presence; both feed only Status and RequeueAt.
//
// Assemble allocates only for what changed: the new desired state and the
// changes' messages.
func (p *Planner) Assemble(pl *Placement, had bool, revs func(k int) []string, observed []schema.InstanceStatus, online bool, out *NodeResult) {
	p.AssembleWithPrefetch(pl, had, revs, nil, observed, online, out)
}

// AssembleWithPrefetch is Assemble with the node's prefetch asks: for each
// daemonset k the node runs that is not an orphan, prefetch(k) is the
// revision it is to download before it switches ("" for none). The asks
// go into the desired state's Prefetch, and the config objects their
// revisions reference (a new imagePullSecret) into its ConfigMaps and
// Secrets. A nil prefetch asks nothing.
func (p *Planner) AssembleWithPrefetch(pl *Placement, had bool, revs func(k int) []string, prefetch func(k int) string,
	observed []schema.InstanceStatus, online bool, out *NodeResult) {
	out.reset(len(p.ds))
	p.prefetch = p.prefetch[:0]
	p.indexObserved(observed)
	p.instances = p.instances[:0]
	for k := range p.ds {
		d := &pl.DaemonSets[k]
		out.Unscheduled = appendDeleted(out.Unscheduled, pl.node, d.deleted, ReasonDaemonSetDeleted)
		if p.ds[k].Orphan {
			p.instances = appendCompact(p.instances, d.Have...)
			continue
		}
		start := len(p.instances)
		if d.Runs {
			p.appendRevisions(k, revs, pl.node, d.Have)
			p.appendPrefetch(k, prefetch)
		}
		placed := p.instances[start:]
		out.record(pl.node, p.ds[k].Key, d, placed)
		if len(placed) > 0 {
			out.requeue(p.now, d.Decision.EvictAt)
		}
		out.Status[k] = p.statusBits(k, d.Decision.ShouldRun, len(placed) > 0, online, out)
	}
	out.Unscheduled = appendDeleted(out.Unscheduled, pl.node, pl.deleted, ReasonDaemonSetDeleted)
	p.assembleDesired(pl.cur, had, out)
}

// appendRevisions appends the instances of daemonset k that revs picks
// for node, which has the instances have: an instance it has stays as it
// is, a new one carries the daemonset's update lock override for node.
func (p *Planner) appendRevisions(k int, revs func(k int) []string, node string, have []schema.DesiredInstance) {
	ds := &p.ds[k]
	if revs == nil {
		p.instances = append(p.instances, p.instance(ds, ds.CurrentRevision, node, have))
		return
	}
	picked := revs(k)
	if len(picked) == 1 { // the rule: nothing to sort
		p.instances = append(p.instances, p.instance(ds, picked[0], node, have))
		return
	}
	p.revisions = append(p.revisions[:0], picked...)
	slices.Sort(p.revisions)
	for _, rev := range slices.Compact(p.revisions) {
		p.instances = append(p.instances, p.instance(ds, rev, node, have))
	}
}

// instance is node's desired instance of revision rev of ds: the one it
// has, or a new one with the update lock override ds gives node.
func (p *Planner) instance(ds *DaemonSetState, rev, node string, have []schema.DesiredInstance) schema.DesiredInstance {
	for _, in := range have {
		if in.Revision == rev {
			return in
		}
	}
	in := schema.DesiredInstance{DaemonSet: ds.Key, Revision: rev}
	if ds.UpdateLockOverride != nil {
		in.OverrideUpdateLock = ds.UpdateLockOverride(node)
	}
	return in
}

// appendPrefetch appends daemonset k's prefetch ask, if any.
func (p *Planner) appendPrefetch(k int, prefetch func(k int) string) {
	if prefetch == nil {
		return
	}
	if rev := prefetch(k); rev != "" {
		p.prefetch = append(p.prefetch, schema.DesiredInstance{DaemonSet: p.ds[k].Key, Revision: rev})
	}
}

// assembleDesired sets out.Desired from p.instances, p.prefetch and the
// config objects they reference, copying them only when they differ from
// cur.
func (p *Planner) assembleDesired(cur NodeDesired, had bool, out *NodeResult) {
	objects := p.instances
	if len(p.prefetch) > 0 {
		p.objects = append(append(p.objects[:0], p.instances...), p.prefetch...)
		objects = p.objects
	}
	p.cms, p.secrets = p.configs.appendObjects(p.cms[:0], p.secrets[:0], objects)
	if had && slices.Equal(p.instances, cur.Instances) && slices.Equal(p.cms, cur.ConfigMaps) && slices.Equal(p.secrets, cur.Secrets) &&
		slices.Equal(p.prefetch, cur.Prefetch) {
		out.Desired, out.Changed = cur, false
		return
	}
	out.Desired = NodeDesired{
		Generation: cur.Generation + 1,
		Instances:  append(make([]schema.DesiredInstance, 0, len(p.instances)), p.instances...),
		ConfigMaps: cloneRefs(p.cms),
		Secrets:    cloneRefs(p.secrets),
	}
	if len(p.prefetch) > 0 {
		out.Desired.Prefetch = slices.Clone(p.prefetch)
	}
	out.Changed = true
}

// Deleted plans a deleted node (one with a current state, cur, but no
// longer registered): while cur has instances, an empty desired state one
// generation on, to publish, with a NodeDeleted change per daemonset;
// once cur is empty, nothing to publish and forget set, so the caller drops
// the node from its current states. It needs none of the Planner's state.
func (p *Planner) Deleted(node string, cur NodeDesired) (desired NodeDesired, publish, forget bool, changes []Change) {
	if len(cur.Instances) == 0 {
		return cur, false, true, nil
	}
	changes = appendDeleted(nil, node, sortedInstances(cur.Instances), ReasonNodeDeleted)
	return NodeDesired{Generation: cur.Generation + 1, Instances: []schema.DesiredInstance{}}, true, false, changes
}

// reset empties r for a node planned against n daemonsets.
func (r *NodeResult) reset(n int) {
	r.Desired, r.Changed, r.RequeueAt = NodeDesired{}, false, time.Time{}
	if !r.accumulate {
		r.Scheduled, r.Updated = r.Scheduled[:0], r.Updated[:0]
		r.Unscheduled, r.Evicted = r.Unscheduled[:0], r.Evicted[:0]
	}
	r.Status = slices.Grow(r.Status[:0], n)[:n]
}

// requeue lowers RequeueAt to at if at is after now.
func (r *NodeResult) requeue(now, at time.Time) {
	if at.After(now) && (r.RequeueAt.IsZero() || at.Before(r.RequeueAt)) {
		r.RequeueAt = at
	}
}

// record records the event-worthy difference between d.Have (before) and
// placed (after) for daemonset ds on node.
func (r *NodeResult) record(node, ds string, d *DaemonSetPlacement, placed []schema.DesiredInstance) {
	run := d.Have
	switch {
	case len(run) == 0 && len(placed) > 0:
		r.Scheduled = appendChange(r.Scheduled, Change{Node: node, DaemonSet: ds, Revision: placed[0].Revision, Reason: ReasonScheduled})
	case len(run) > 0 && len(placed) == 0:
		r.recordRemoval(node, ds, run[0].Revision, &d.Decision)
	case len(run) > 0 && !slices.Equal(run, placed):
		r.Updated = appendChange(r.Updated, Change{Node: node, DaemonSet: ds, Revision: placed[0].Revision, Reason: ReasonUpdated,
			Message: "revision " + revisionList(run) + " replaced by " + revisionList(placed)})
	}
}

// recordRemoval records the removal of daemonset ds (revision) from node
// for the reason d gives: the rollout withheld it, a NoExecute taint
// evicted it, or placement no longer allows it.
func (r *NodeResult) recordRemoval(node, ds, revision string, d *placement.Decision) {
	c := Change{Node: node, DaemonSet: ds, Revision: revision}
	switch d.Reason {
	case placement.ReasonNone:
		c.Reason, c.Message = ReasonWithheld, "the rollout withholds the daemonset from the node"
		r.Unscheduled = appendChange(r.Unscheduled, c)
	case placement.ReasonUntoleratedNoExecute, placement.ReasonTolerationExpired:
		c.Reason, c.Message = d.Reason.String(), strings.Join(d.Reasons(), "; ")
		r.Evicted = appendChange(r.Evicted, c)
	default:
		c.Reason, c.Message = d.Reason.String(), strings.Join(d.Reasons(), "; ")
		r.Unscheduled = appendChange(r.Unscheduled, c)
	}
}

// appendDeleted appends the removal of instances, sorted, for reason (a
// deleted daemonset or node): one Unscheduled change per daemonset.
func appendDeleted(changes []Change, node string, instances []schema.DesiredInstance, reason string) []Change {
	for i, inst := range instances {
		if i > 0 && instances[i-1].DaemonSet == inst.DaemonSet {
			continue
		}
		msg := "daemonset " + inst.DaemonSet + " was deleted"
		if reason == ReasonNodeDeleted {
			msg = "node " + node + " was deleted"
		}
		changes = appendChange(changes, Change{Node: node, DaemonSet: inst.DaemonSet, Revision: inst.Revision, Reason: reason, Message: msg})
	}
	return changes
}
