package reconcile

import (
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

// Plan decides every node's desired state and returns what changed.
//
// For each node and each daemonset, the node runs the daemonset when
// placement says ShouldRun, or when it already runs it (in Current) and
// placement says ShouldContinueRunning; it runs the revisions the
// daemonset's RevisionFunc picks (CurrentRevision by default). Instances of
// daemonsets not in Input.DaemonSets are removed; instances of orphaned
// daemonsets are kept as they are. A node's desired state is listed in
// Output.Desired, with its generation incremented, only when its instances
// differ from Current (or it has no Current entry yet): an offline node
// whose placement does not change keeps its generation. A node in Current
// but not in Nodes (deleted) gets an empty desired state once, so a
// reachable agent stops everything, and is listed in Output.Forget on the
// next Plan.
//
// Plan never places two instances of one daemonset on one node unless a
// RevisionFunc asks for a surge pair. Instances are sorted by daemonset and
// then revision, so equal sets compare equal. Plan panics if a daemonset
// that is not an orphan has no Policy.
func Plan(in Input) Output {
	p := newPlanner(&in)
	nodes := sortedNodes(in.Nodes)
	known := 0
	for i := range nodes {
		if p.planNode(&nodes[i]) {
			known++
		}
	}
	if known < len(in.Current) {
		p.planDeletedNodes(nodes)
	}
	p.requeue(in.NodesChangeAt)
	p.finishStatus()
	return p.out
}

// planner holds one Plan's state. The scratch slices are reused from node to
// node so the steady state allocates nothing per node.
type planner struct {
	in     *Input
	out    Output
	ds     []DaemonSetState  // sorted by Key, unique
	index  map[string]int    // Key to position in ds
	status []DaemonSetStatus // parallel to ds

	instances []schema.DesiredInstance // the node's new instances
	revisions []string                 // one daemonset's revisions
	observed  []schema.InstanceStatus  // the node's observed instances
	obsDS     []int                    // position in ds of each observed instance, -1 if none
}

func newPlanner(in *Input) *planner {
	ds := slices.Clone(in.DaemonSets)
	slices.SortStableFunc(ds, func(a, b DaemonSetState) int { return strings.Compare(a.Key, b.Key) })
	ds = slices.CompactFunc(ds, func(a, b DaemonSetState) bool { return a.Key == b.Key })
	p := &planner{
		in:     in,
		ds:     ds,
		index:  make(map[string]int, len(ds)),
		status: make([]DaemonSetStatus, len(ds)),
		out:    Output{Desired: make(map[string]NodeDesired)},
	}
	for i := range ds {
		if !ds[i].Orphan && ds[i].Policy == nil {
			panic("reconcile: daemonset " + ds[i].Key + " has no placement policy")
		}
		p.index[ds[i].Key] = i
	}
	return p
}

// planNode plans one node and reports whether it had a Current entry.
func (p *planner) planNode(node *schema.Node) (had bool) {
	cur, had := p.in.Current[node.Name]
	online := p.in.Online[node.Name]
	p.indexObserved(node.Name)
	p.instances = p.instances[:0]
	rest := sortedInstances(cur.Instances)
	for k := range p.ds {
		var run []schema.DesiredInstance
		run, rest = p.takeRun(node.Name, p.ds[k].Key, rest)
		if p.ds[k].Orphan {
			p.instances = appendCompact(p.instances, run...)
			continue
		}
		p.planDaemonSet(node, k, run, online)
	}
	p.dropDeleted(node.Name, rest, ReasonDaemonSetDeleted)
	cms, secrets := p.in.Configs.objects(p.instances)
	if had && slices.Equal(p.instances, cur.Instances) && slices.Equal(cms, cur.ConfigMaps) && slices.Equal(secrets, cur.Secrets) {
		return true
	}
	p.out.Desired[node.Name] = NodeDesired{
		Generation: cur.Generation + 1,
		Instances:  append(make([]schema.DesiredInstance, 0, len(p.instances)), p.instances...),
		ConfigMaps: cms,
		Secrets:    secrets,
	}
	return had
}

// takeRun splits rest, sorted, into the instances of daemonset key and what
// follows them; instances of daemonsets before key (deleted ones) are
// dropped.
func (p *planner) takeRun(node, key string, rest []schema.DesiredInstance) (run, after []schema.DesiredInstance) {
	i := 0
	for i < len(rest) && rest[i].DaemonSet < key {
		i++
	}
	p.dropDeleted(node, rest[:i], ReasonDaemonSetDeleted)
	rest = rest[i:]
	n := 0
	for n < len(rest) && rest[n].DaemonSet == key {
		n++
	}
	return rest[:n:n], rest[n:]
}

// planDaemonSet decides daemonset k on node, appends its instances to
// p.instances and records the change, the status and the requeue time.
func (p *planner) planDaemonSet(node *schema.Node, k int, run []schema.DesiredInstance, online bool) {
	ds := &p.ds[k]
	d := ds.Policy.Decide(node, p.in.Now)
	start := len(p.instances)
	if d.ShouldRun || len(run) > 0 && d.ShouldContinueRunning {
		p.appendRevisions(node.Name, ds, run)
	}
	placed := p.instances[start:]
	p.recordChange(node.Name, ds.Key, d, run, placed)
	if len(placed) > 0 {
		p.requeue(d.EvictAt)
	}
	p.count(k, d.ShouldRun, len(placed) > 0, online)
}

// appendRevisions appends the instances of ds that node is to run.
func (p *planner) appendRevisions(node string, ds *DaemonSetState, run []schema.DesiredInstance) {
	if ds.Revisions == nil {
		p.instances = append(p.instances, schema.DesiredInstance{DaemonSet: ds.Key, Revision: ds.CurrentRevision})
		return
	}
	p.revisions = append(p.revisions[:0], ds.Revisions(node, run)...)
	slices.Sort(p.revisions)
	for _, rev := range slices.Compact(p.revisions) {
		p.instances = append(p.instances, schema.DesiredInstance{DaemonSet: ds.Key, Revision: rev})
	}
}

// recordChange records the event-worthy difference between run (before) and
// placed (after) for one daemonset on one node.
func (p *planner) recordChange(node, ds string, d placement.Decision, run, placed []schema.DesiredInstance) {
	switch {
	case len(run) == 0 && len(placed) > 0:
		p.out.Scheduled = appendChange(p.out.Scheduled, Change{Node: node, DaemonSet: ds, Revision: placed[0].Revision, Reason: ReasonScheduled})
	case len(run) > 0 && len(placed) == 0:
		p.recordRemoval(node, ds, run[0].Revision, d)
	case len(run) > 0 && !slices.Equal(run, placed):
		p.out.Updated = appendChange(p.out.Updated, Change{Node: node, DaemonSet: ds, Revision: placed[0].Revision, Reason: ReasonUpdated,
			Message: "revision " + revisionList(run) + " replaced by " + revisionList(placed)})
	}
}

func (p *planner) recordRemoval(node, ds, revision string, d placement.Decision) {
	c := Change{Node: node, DaemonSet: ds, Revision: revision}
	switch d.Reason {
	case placement.ReasonNone:
		c.Reason, c.Message = ReasonWithheld, "the rollout withholds the daemonset from the node"
		p.out.Unscheduled = appendChange(p.out.Unscheduled, c)
	case placement.ReasonUntoleratedNoExecute, placement.ReasonTolerationExpired:
		c.Reason, c.Message = d.Reason.String(), strings.Join(d.Reasons(), "; ")
		p.out.Evicted = appendChange(p.out.Evicted, c)
	default:
		c.Reason, c.Message = d.Reason.String(), strings.Join(d.Reasons(), "; ")
		p.out.Unscheduled = appendChange(p.out.Unscheduled, c)
	}
}

// dropDeleted records the removal of instances, sorted, for reason: one
// Unscheduled change per daemonset.
func (p *planner) dropDeleted(node string, instances []schema.DesiredInstance, reason string) {
	for i, inst := range instances {
		if i > 0 && instances[i-1].DaemonSet == inst.DaemonSet {
			continue
		}
		msg := "daemonset " + inst.DaemonSet + " was deleted"
		if reason == ReasonNodeDeleted {
			msg = "node " + node + " was deleted"
		}
		p.out.Unscheduled = appendChange(p.out.Unscheduled, Change{Node: node, DaemonSet: inst.DaemonSet, Revision: inst.Revision, Reason: reason, Message: msg})
	}
}

// planDeletedNodes publishes an empty desired state to every node of
// Current missing from nodes that still has instances, and forgets the
// others.
func (p *planner) planDeletedNodes(nodes []schema.Node) {
	var gone []string
	for name := range p.in.Current {
		_, found := slices.BinarySearchFunc(nodes, name, func(n schema.Node, name string) int { return strings.Compare(n.Name, name) })
		if !found {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		cur := p.in.Current[name]
		if len(cur.Instances) == 0 {
			p.out.Forget = append(p.out.Forget, name)
			continue
		}
		p.dropDeleted(name, sortedInstances(cur.Instances), ReasonNodeDeleted)
		p.out.Desired[name] = NodeDesired{Generation: cur.Generation + 1, Instances: []schema.DesiredInstance{}}
	}
}

// requeue lowers RequeueAt to at if at is after Now.
func (p *planner) requeue(at time.Time) {
	if at.After(p.in.Now) && (p.out.RequeueAt.IsZero() || at.Before(p.out.RequeueAt)) {
		p.out.RequeueAt = at
	}
}

// sortedNodes returns nodes sorted by name: nodes itself if it is, a sorted
// copy otherwise.
func sortedNodes(nodes []schema.Node) []schema.Node {
	byName := func(a, b schema.Node) int { return strings.Compare(a.Name, b.Name) }
	if slices.IsSortedFunc(nodes, byName) {
		return nodes
	}
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, byName)
	return nodes
}

// compareInstances orders instances by daemonset, then revision.
func compareInstances(a, b schema.DesiredInstance) int {
	if c := strings.Compare(a.DaemonSet, b.DaemonSet); c != 0 {
		return c
	}
	return strings.Compare(a.Revision, b.Revision)
}

// sortedInstances returns instances sorted: instances itself if it is, a
// sorted copy otherwise.
func sortedInstances(instances []schema.DesiredInstance) []schema.DesiredInstance {
	if slices.IsSortedFunc(instances, compareInstances) {
		return instances
	}
	instances = slices.Clone(instances)
	slices.SortFunc(instances, compareInstances)
	return instances
}

// appendCompact appends the sorted instances to dst, skipping duplicates.
func appendCompact(dst []schema.DesiredInstance, instances ...schema.DesiredInstance) []schema.DesiredInstance {
	for i, inst := range instances {
		if i == 0 || inst != instances[i-1] {
			dst = append(dst, inst)
		}
	}
	return dst
}

// revisionList renders the revisions of instances of one daemonset: "a" or
// "a+b" for a surge pair.
func revisionList(instances []schema.DesiredInstance) string {
	if len(instances) == 1 {
		return instances[0].Revision
	}
	revs := make([]string, len(instances))
	for i, inst := range instances {
		revs[i] = inst.Revision
	}
	return strings.Join(revs, "+")
}

// appendChange appends c to changes, doubling the capacity when full: a
// first plan over a large fleet records a change per node and daemonset,
// and append's gentler growth for large slices would copy them many times.
func appendChange(changes []Change, c Change) []Change {
	if len(changes) == cap(changes) {
		grown := make([]Change, len(changes), max(2*cap(changes), 64))
		copy(grown, changes)
		changes = grown
	}
	return append(changes, c)
}
