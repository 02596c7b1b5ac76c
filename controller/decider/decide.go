package decider

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/internal/fanout"
	"github.com/edgeset/edgeset/schema"
)

// Decision is what one Decide decided.
type Decision struct {
	// Desired holds the nodes whose desired state changes, each with the
	// generation of its current state plus one (the store assigns the
	// real one: see Commit).
	Desired map[string]reconcile.NodeDesired
	// Forget lists deleted nodes whose empty desired state was published.
	Forget []string
	// The changes, for events (see reconcile.Output).
	Scheduled, Updated, Unscheduled, Evicted []reconcile.Change
	// Rollouts holds the step of every daemonset whose rollout was
	// stepped; the others are unchanged.
	Rollouts map[string]rollout.Delta
	// RequeueAt is the earliest instant at which the clock alone changes a
	// decision (now itself when a rollout asks to be stepped again at
	// once); zero if none.
	RequeueAt time.Time
	// Placed counts the nodes placed and assembled; Full tells a decision
	// over every node from scratch.
	Placed int
	Full   bool
}

// Decide decides at now over the inputs set so far and returns what
// changes. The decider assumes the decision is applied: Commit then tells
// it the generations the store assigned, and Forget the nodes dropped.
//
// Each stage computes once: stage one places the nodes the inputs touched
// and keeps their decisions (a byte per daemonset, reconcile.Kept); stage
// two steps the rollouts; stage three assembles those nodes from their
// kept placements (reconcile.Planner.Recall), and places only the nodes
// that stage two moved and stage one had not placed.
func (d *Decider) Decide(now time.Time) Decision {
	out := Decision{Desired: map[string]reconcile.NodeDesired{}, Rollouts: map[string]rollout.Delta{}, Full: d.full}
	d.Due(now)
	d.now = now
	d.newPlanner(now)
	todo := d.todo()
	assemble := d.placeAll(todo)        // stage one
	d.stepRollouts(now, &out, assemble) // stage two
	d.assembleAll(assemble, todo, &out) // stage three
	out.Placed = len(assemble)
	d.done()
	out.RequeueAt = d.requeueAt()
	return out
}

// notPlaced marks, in the nodes to assemble, one stage one did not place.
const notPlaced = -1

// placeAll places the registered nodes of todo, keeping their placements
// in d.kept, and takes the others out of every daemonset; it returns the
// nodes to assemble, each with its row in d.kept.
func (d *Decider) placeAll(todo []string) map[string]int {
	assemble := make(map[string]int, len(todo))
	d.kept.Reset(len(d.plannerK), len(todo))
	for _, name := range todo {
		if n := d.nodes[name]; n.Model != nil {
			d.place(n)
			assemble[name] = d.kept.Keep(&d.scratch)
		} else {
			d.unplace(n)
		}
	}
	return assemble
}

// assembleAll assembles the nodes to assemble and publishes or forgets
// the deleted nodes of todo, each in name order, so the changes come out
// sorted by node (and, per node, by daemonset) without sorting them.
// Stage three is pure per node, so a large decision runs it on every
// core (assembleRange), then folds the results in, in order.
func (d *Decider) assembleAll(assemble map[string]int, todo []string, out *Decision) {
	d.assigns, d.asks = d.assigns[:0], d.asks[:0]
	for _, slot := range d.plannerK {
		delta := out.Rollouts[d.slots[slot].Key]
		d.assigns = append(d.assigns, delta.Assign)
		d.asks = append(d.asks, delta.Prefetch)
	}
	names := slices.Sorted(maps.Keys(assemble))
	nodes := make([]*node, len(names))
	rows := make([]int, len(names))
	for i, name := range names {
		nodes[i], rows[i] = d.nodes[name], assemble[name]
	}
	var chunks []*assembled
	var mu sync.Mutex
	fanout.Each(len(nodes), d.chunk, func(lo, hi int) {
		p, pl, res := d.planner, &d.scratch, &d.result
		if lo > 0 { // not the caller's goroutine: scratch of its own
			p, pl, res = d.planner.Fork(), &reconcile.Placement{}, &reconcile.NodeResult{}
		}
		c := d.assembleRange(p, pl, res, lo, nodes[lo:hi], rows[lo:hi])
		mu.Lock()
		chunks = append(chunks, c)
		mu.Unlock()
	})
	slices.SortFunc(chunks, func(a, b *assembled) int { return a.lo - b.lo })
	for _, c := range chunks {
		d.fold(nodes[c.lo:c.lo+len(c.nodes)], c, out)
	}
	for _, name := range slices.Sorted(slices.Values(todo)) {
		if n := d.nodes[name]; n != nil && n.Model == nil {
			d.deleted(n, out)
		}
	}
}

// assembleChunk is the fewest nodes one goroutine of stage three takes: a
// decision over fewer than two chunks (a node's event) runs on one.
const assembleChunk = 256

// assembled is stage three's result over a range of nodes, from lo, in
// their order: what assemble folds into the decision and the decider.
type assembled struct {
	lo    int
	nodes []assembledNode
	// status holds each node's contributions, len(plannerK) apiece.
	status []reconcile.StatusBits
	// The changes, node after node.
	scheduled, updated, unscheduled, evicted []reconcile.Change
}

type assembledNode struct {
	desired   reconcile.NodeDesired
	changed   bool
	requeueAt time.Time
}

// assembleRange runs stage three for nodes, whose placements are at rows
// of d.kept (notPlaced: place it now), with planner p and scratch pl and
// res. It only reads the decider, so ranges run concurrently.
func (d *Decider) assembleRange(p *reconcile.Planner, pl *reconcile.Placement, res *reconcile.NodeResult, lo int, nodes []*node, rows []int) *assembled {
	c := &assembled{lo: lo, nodes: make([]assembledNode, len(nodes)), status: make([]reconcile.StatusBits, 0, len(nodes)*len(d.plannerK))}
	for i, n := range nodes {
		if rows[i] == notPlaced {
			p.Place(n.Model, n.Current, pl)
		} else {
			p.Recall(n.Model, n.Current, &d.kept, rows[i], pl)
		}
		p.AssembleWithPrefetch(pl, n.HasCurrent, d.revisionsOf(n, pl), d.prefetchOf(n), n.Observed, n.Online, res)
		c.nodes[i] = assembledNode{desired: res.Desired, changed: res.Changed, requeueAt: res.RequeueAt}
		c.status = append(c.status, res.Status...)
		c.scheduled = append(c.scheduled, res.Scheduled...)
		c.updated = append(c.updated, res.Updated...)
		c.unscheduled = append(c.unscheduled, res.Unscheduled...)
		c.evicted = append(c.evicted, res.Evicted...)
	}
	return c
}

// revisionsOf is stage three's revision choice for node n placed in pl:
// the rollout's assignment where its step made one, what the node has
// otherwise, or the target for a node that has none.
func (d *Decider) revisionsOf(n *node, pl *reconcile.Placement) func(k int) []string {
	return func(k int) []string {
		if a, ok := d.assigns[k][n.Name]; ok {
			return a
		}
		if have := pl.DaemonSets[k].Have; len(have) > 0 {
			revs := make([]string, len(have))
			for i, in := range have {
				revs[i] = in.Revision
			}
			return revs
		}
		return []string{d.slots[d.plannerK[k]].tracker.State().Target}
	}
}

// fold records the assembled range c of nodes: their status
// contributions, desired states, changes and requeue instants.
func (d *Decider) fold(nodes []*node, c *assembled, out *Decision) {
	width := len(d.plannerK)
	for i, n := range nodes {
		r := &c.nodes[i]
		status := c.status[i*width : (i+1)*width]
		for k, slot := range d.plannerK {
			ds := d.slots[slot]
			ds.status.Sub(n.bits[slot])
			n.bits[slot] = status[k]
			ds.status.Add(n.bits[slot])
		}
		if r.changed {
			r.desired.Instances = d.lists.intern(r.desired.Instances)
			out.Desired[n.Name] = r.desired
		}
		d.schedule(n, earliestAfter(d.now, r.requeueAt, n.ModelChangeAt))
	}
	out.Scheduled = append(out.Scheduled, c.scheduled...)
	out.Updated = append(out.Updated, c.updated...)
	out.Unscheduled = append(out.Unscheduled, c.unscheduled...)
	out.Evicted = append(out.Evicted, c.evicted...)
}

// done clears what a decision consumed. A cleared map keeps its buckets,
// and ranging over it costs them: after a decision over many nodes, the
// dirty set starts again from a small one.
func (d *Decider) done() {
	if len(d.dirty) > 1024 {
		d.dirty = map[string]bool{}
	} else {
		clear(d.dirty)
	}
	d.full, d.replace = false, false
	clear(d.replaced)
	if d.kept.Room() > 1<<16 {
		d.kept = reconcile.Kept{} // a fleet-wide decision's room is not kept between decisions
	}
}

// newPlanner compiles the planner over the daemonsets as they are now.
func (d *Decider) newPlanner(now time.Time) {
	states := make([]reconcile.DaemonSetState, 0, len(d.ds))
	for _, ds := range d.ds {
		st := reconcile.DaemonSetState{Key: ds.Key, CurrentRevision: ds.Revision, MinReadySeconds: ds.MinReadySeconds, Orphan: ds.Orphan}
		if !ds.Orphan {
			st.Policy = ds.Policy
			st.UpdateLockOverride = ds.lockOverride
		}
		states = append(states, st)
	}
	d.planner = reconcile.NewPlanner(now, states, d.configs)
	d.plannerK = d.plannerK[:0]
	for _, st := range d.planner.DaemonSets() {
		d.plannerK = append(d.plannerK, d.ds[st.Key].slot)
	}
}

// todo lists the nodes this decision places: every node after a change
// that concerns them all, the dirty ones otherwise.
func (d *Decider) todo() []string {
	if d.full || d.replace {
		return keys(d.nodes)
	}
	out := make([]string, 0, len(d.dirty))
	for name := range d.dirty {
		if _, ok := d.nodes[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// place runs stage one for a registered node and tells the trackers
// whether the node is one of their nodes, with its facts: every tracker
// when the node's facts changed (or in a full decision), otherwise only
// those of the daemonsets whose placement changed; the node's standing
// with the others is what it was.
func (d *Decider) place(n *node) {
	pl := &d.scratch
	d.planner.Place(n.Model, n.Current, pl)
	d.grow(n)
	all := d.full || d.dirty[n.Name]
	told := n.told
	n.told = nil
	if d.full {
		told = nil
	}
	for k, slot := range d.plannerK {
		ds := d.slots[slot]
		if ds.tracker == nil || !all && !d.replaced[slot] {
			continue
		}
		switch p := &pl.DaemonSets[k]; {
		case p.Runs && n.member[slot] && !d.replaced[slot] && told != nil && sameRolloutFacts(told, &n.Node, ds.Key) &&
			ds.Strategy.SameLabelFacts(labelsOf(told), labelsOf(&n.Node)):
			// The tracker has these facts.
		case p.Runs:
			if ds.tracker.Set(rolloutNode(n, ds, p.Have)) || !n.member[slot] {
				ds.step = true
			}
			n.member[slot] = true
		case n.member[slot]:
			ds.tracker.Remove(n.Name)
			n.member[slot] = false
			ds.step = true
		}
	}
}

// grow sizes a node's per-slot tables for the daemonsets there are.
func (d *Decider) grow(n *node) {
	for len(n.bits) < len(d.slots) {
		n.bits = append(n.bits, 0)
		n.member = append(n.member, false)
	}
}

// sameRolloutFacts reports whether a and b are the same node as far as
// the rollout of daemonset key sees it: presence, the instances of key it
// was asked to run, and those it reports.
func sameRolloutFacts(a, b *Node, key string) bool {
	if a.Online != b.Online || !a.Online && !a.OfflineSince.Equal(b.OfflineSince) || !samePrefetchFacts(a, b, key) {
		return false
	}
	if !slices.Equal(instancesOf(a.Current.Instances, key), instancesOf(b.Current.Instances, key)) {
		return false
	}
	i, j := 0, 0
	for {
		for i < len(a.Observed) && a.Observed[i].DaemonSet != key {
			i++
		}
		for j < len(b.Observed) && b.Observed[j].DaemonSet != key {
			j++
		}
		if i == len(a.Observed) || j == len(b.Observed) {
			return i == len(a.Observed) && j == len(b.Observed)
		}
		if !sameInstance(&a.Observed[i], &b.Observed[j]) {
			return false
		}
		i, j = i+1, j+1
	}
}

// labelsOf is what a per-site budget and maintenance windows read of n.
func labelsOf(n *Node) map[string]string {
	if n.Model == nil {
		return nil
	}
	return n.Model.Labels
}

// sameInstance compares the fields of a reported instance a rollout reads.
func sameInstance(a, b *schema.InstanceStatus) bool {
	if a.Revision != b.Revision || a.Ready != b.Ready || a.Phase != b.Phase || a.Message != b.Message {
		return false
	}
	if (a.ReadySince == nil) != (b.ReadySince == nil) || (a.UpdateLock == nil) != (b.UpdateLock == nil) {
		return false
	}
	if a.UpdateLock != nil && (!a.UpdateLock.HeldSince.Equal(b.UpdateLock.HeldSince) || a.UpdateLock.Deferred != b.UpdateLock.Deferred) {
		return false
	}
	return a.ReadySince == nil || a.ReadySince.Equal(*b.ReadySince)
}

// lockOverride is the update lock override ds's rollout state gives node
// (schema.DesiredInstance.OverrideUpdateLock), "" for none. Stage three
// calls it after the rollout step, from any of its goroutines: it only
// reads the tracker's state.
func (ds *daemonSet) lockOverride(node string) string {
	if ds.tracker == nil {
		return ""
	}
	at, ok := ds.tracker.State().LockOverrides[node]
	if !ok {
		return ""
	}
	return schema.FormatLockInstant(at)
}

// rolloutNode describes node n for the rollout of daemonset ds, given the
// instances of it n was last asked to run. Of what n reports, it keeps the
// instances of revisions the rollout can assign it (those it has, the
// target, the stable and previous revisions a rollback returns to): the
// others change no decision, and an agent reporting made-up revisions
// cannot make the tracker hold them.
func rolloutNode(n *node, ds *daemonSet, have []schema.DesiredInstance) rollout.Node {
	key, st := ds.Key, ds.tracker.State()
	rn := rollout.Node{Name: n.Name, Online: n.Online, Labels: labelsOf(&n.Node)}
	if !n.Online {
		rn.OfflineSince = n.OfflineSince
	}
	for _, in := range have {
		rn.Assigned = append(rn.Assigned, in.Revision)
	}
	slices.Sort(rn.Assigned)
	for _, obs := range n.Observed {
		if obs.DaemonSet != key {
			continue
		}
		if r := obs.Revision; r != st.Target && r != st.Stable && r != st.Previous && !slices.Contains(rn.Assigned, r) {
			continue
		}
		inst := rollout.Instance{Revision: obs.Revision, Ready: obs.Ready, Phase: obs.Phase, Message: obs.Message}
		if obs.ReadySince != nil {
			inst.ReadySince = *obs.ReadySince
		}
		if l := obs.UpdateLock; l != nil {
			inst.LockedSince, inst.LockDeferred = l.HeldSince, l.Deferred
		}
		rn.Observed = append(rn.Observed, inst)
	}
	prefetchFacts(n, key, st, &rn)
	return rn
}

// stepRollouts runs stage two: the rollout step of every daemonset whose
// nodes, strategy or state changed, or whose instant has come. Nodes a
// step moves are assembled too.
func (d *Decider) stepRollouts(now time.Time, out *Decision, assemble map[string]int) {
	for _, ds := range d.ds {
		if ds.tracker == nil {
			continue
		}
		if d.full {
			ds.tracker.SetState(ds.tracker.State()) // step over every node
		}
		if !d.full && !ds.step && (ds.due.IsZero() || ds.due.After(now)) {
			continue
		}
		delta := ds.tracker.Step(now)
		// A step that changed the state may change it again at the next
		// one without any new input (an instance that failed its deadline
		// while available recovers): a full pass, which steps every
		// rollout, would; so does this one.
		ds.last, ds.due, ds.step = delta, delta.RequeueAt, delta.StateChanged
		out.Rollouts[ds.Key] = delta
		for name := range delta.Assign {
			d.alsoAssemble(assemble, name)
		}
		for name := range delta.Prefetch {
			d.alsoAssemble(assemble, name)
		}
	}
}

// alsoAssemble adds a registered node a rollout step moved to the nodes to
// assemble; stage three places it, unless stage one did.
func (d *Decider) alsoAssemble(assemble map[string]int, name string) {
	if _, ok := assemble[name]; ok {
		return
	}
	if n, ok := d.nodes[name]; ok && n.Model != nil {
		assemble[name] = notPlaced
	}
}

// unplace takes a node that is not registered out of every daemonset's
// status and rollout: it contributes nothing, as a node a full pass does
// not place.
func (d *Decider) unplace(n *node) {
	d.schedule(n, time.Time{})
	for slot, b := range n.bits {
		if ds := d.slots[slot]; ds != nil {
			ds.status.Sub(b)
		}
		n.bits[slot] = 0
	}
	for slot, in := range n.member {
		if ds := d.slots[slot]; in && ds != nil && ds.tracker != nil {
			ds.tracker.Remove(n.Name)
			ds.step = true
		}
		n.member[slot] = false
	}
}

// deleted handles a node that is not registered: a deleted one gets its
// empty desired state once, then is forgotten; one merely unknown keeps
// its state untouched.
func (d *Decider) deleted(n *node, out *Decision) {
	if !n.Deleted || !n.HasCurrent {
		return
	}
	desired, publish, forget, changes := d.planner.Deleted(n.Name, n.Current)
	switch {
	case forget:
		out.Forget = append(out.Forget, n.Name)
	case publish:
		out.Desired[n.Name] = desired
		out.Unscheduled = append(out.Unscheduled, changes...)
	}
}

// requeueAt is the earliest instant at which a node or a rollout changes
// by the clock alone: after now for nodes, now itself for a rollout whose
// last step changed its state (it is stepped again, see stepRollouts) or
// that asks to be stepped again at once; zero if none.
func (d *Decider) requeueAt() time.Time {
	at := d.nextNode()
	for _, ds := range d.ds {
		if ds.tracker == nil {
			continue
		}
		due := ds.due
		if ds.step {
			due = d.now
		}
		if !due.IsZero() && (at.IsZero() || due.Before(at)) {
			at = due
		}
	}
	return at
}

// earliestAfter returns the earliest of a and b that is after now; zero
// if neither is.
func earliestAfter(now time.Time, a, b time.Time) time.Time {
	if !a.After(now) {
		a = time.Time{}
	}
	if !b.After(now) {
		b = time.Time{}
	}
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
