package reconcile

import (
	"slices"
	"strings"
	"time"

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
//
// Plan is a Planner's stages over the whole fleet: NewPlanner, then Place
// and Assemble for every node in name order (each daemonset's
// RevisionFunc picking the revisions), Deleted for every deleted node, the
// status contributions summed and RequeueAt the earliest of the nodes' and
// NodesChangeAt. A caller that plans some nodes only uses the stages.
func Plan(in Input) Output {
	p := NewPlanner(in.Now, in.DaemonSets, in.Configs)
	out := Output{Desired: make(map[string]NodeDesired)}
	bits := make([]int, len(p.ds)*statusBitsValues) // per daemonset, how many nodes contribute each StatusBits
	var pl Placement
	res := NodeResult{accumulate: true}
	var name string // the node planned
	revs := func(k int) []string {
		if ds := &p.ds[k]; ds.Revisions != nil {
			return ds.Revisions(name, pl.DaemonSets[k].Have)
		}
		return p.CurrentRevision(k)
	}
	if !slices.ContainsFunc(p.ds, func(ds DaemonSetState) bool { return ds.Revisions != nil }) {
		revs = nil // CurrentRevision everywhere, without a call per daemonset
	}
	nodes := sortedNodes(in.Nodes)
	known := 0
	for i := range nodes {
		node := &nodes[i]
		name = node.Name
		cur, had := in.Current[name]
		if had {
			known++
		}
		p.Place(node, cur, &pl)
		p.Assemble(&pl, had, revs, in.Observed[name].Instances, in.Online[name], &res)
		if res.Changed {
			out.Desired[name] = res.Desired
		}
		out.requeue(in.Now, res.RequeueAt)
		for k, b := range res.Status {
			bits[k*statusBitsValues+int(b)]++
		}
	}
	out.Scheduled, out.Updated, out.Unscheduled, out.Evicted = res.Scheduled, res.Updated, res.Unscheduled, res.Evicted
	if known < len(in.Current) {
		out.addDeletedNodes(p, in.Current, nodes)
	}
	out.requeue(in.Now, in.NodesChangeAt)
	out.Status = make(map[string]DaemonSetStatus, len(p.ds))
	for k := range p.ds {
		if !p.ds[k].Orphan {
			out.Status[p.ds[k].Key] = statusOfCounts(bits[k*statusBitsValues : (k+1)*statusBitsValues])
		}
	}
	return out
}

// statusOfCounts returns the status that counts[b] nodes contributing b, for
// every StatusBits b, sum to.
func statusOfCounts(counts []int) DaemonSetStatus {
	var st DaemonSetStatus
	for b, n := range counts {
		if n > 0 {
			st.addN(StatusBits(b), n)
		}
	}
	return st
}

// addDeletedNodes plans, with p.Deleted, every node of current missing
// from nodes (sorted), in name order.
func (o *Output) addDeletedNodes(p *Planner, current map[string]NodeDesired, nodes []schema.Node) {
	var gone []string
	for name := range current {
		_, found := slices.BinarySearchFunc(nodes, name, func(n schema.Node, name string) int { return strings.Compare(n.Name, name) })
		if !found {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		desired, publish, forget, changes := p.Deleted(name, current[name])
		if publish {
			o.Desired[name] = desired
		}
		if forget {
			o.Forget = append(o.Forget, name)
		}
		o.Unscheduled = append(o.Unscheduled, changes...)
	}
}

// requeue lowers RequeueAt to at if at is after now.
func (o *Output) requeue(now, at time.Time) {
	if at.After(now) && (o.RequeueAt.IsZero() || at.Before(o.RequeueAt)) {
		o.RequeueAt = at
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

// instancesSorted reports whether instances are sorted, as
// slices.IsSortedFunc with compareInstances would, in one string
// comparison per instance and no indirect call: Place checks every node's
// current state.
func instancesSorted(instances []schema.DesiredInstance) bool {
	for i := 1; i < len(instances); i++ {
		a, b := &instances[i-1], &instances[i]
		if c := strings.Compare(a.DaemonSet, b.DaemonSet); c > 0 || c == 0 && a.Revision > b.Revision {
			return false
		}
	}
	return true
}

// sortedInstances returns instances sorted: instances itself if it is, a
// sorted copy otherwise.
func sortedInstances(instances []schema.DesiredInstance) []schema.DesiredInstance {
	if instancesSorted(instances) {
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
		grown := make([]Change, len(changes), max(2*cap(changes), 8))
		copy(grown, changes)
		changes = grown
	}
	return append(changes, c)
}
