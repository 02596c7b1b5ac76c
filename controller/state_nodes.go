package controller

import (
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// The node side of fleetState: each node's current desired and observed
// state, the dirty and deleted sets. Every write that a pass decides on
// marks the node.

// committer receives a stored decision: the reconcile pass's decider.
type committer interface {
	// Commit records node's published desired state.
	Commit(node string, nd reconcile.NodeDesired)
	// Forget drops a deleted node.
	Forget(node string)
}

// nodeFacts is what the state knows of one node, as copies, for the
// decider.
type nodeFacts struct {
	current    reconcile.NodeDesired
	hasCurrent bool
	deleted    bool
	observed   []schema.InstanceStatus
	prefetch   []schema.PrefetchStatus
}

// facts returns what the state knows of node.
func (fs *fleetState) facts(node string) nodeFacts {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	cur, ok := fs.current[node]
	obs := fs.observed[node]
	return nodeFacts{current: cur, hasCurrent: ok, deleted: fs.deletedNodes[node], observed: obs.Instances, prefetch: obs.Prefetch}
}

// current returns node's current desired state.
func (fs *fleetState) currentOf(node string) (reconcile.NodeDesired, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	nd, ok := fs.current[node]
	return nd, ok
}

// observedOf returns what node last reported it runs.
func (fs *fleetState) observedOf(node string) (schema.ObservedState, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	obs, ok := fs.observed[node]
	return obs, ok
}

// generations returns the generation of node's current desired state and
// the one its last observed state reports.
func (fs *fleetState) generations(node string) (desired, observed uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.current[node].Generation, fs.observed[node].ObservedGeneration
}

// trackLags starts recording which nodes' lag may change (takeLags) and
// returns every node that lags now: whose observed state reports a
// generation below its desired state's, with that desired generation.
// The repair loop calls it once, then takes only the changes, so a round
// costs what changed, not the fleet.
func (fs *fleetState) trackLags() map[string]uint64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.lagMarks = map[string]uint64{}
	out := map[string]uint64{}
	for node := range fs.current {
		if gen := fs.lagLocked(node); gen > 0 {
			out[node] = gen
		}
	}
	return out
}

// untrackLags stops recording lags: the repair loop ended.
func (fs *fleetState) untrackLags() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.lagMarks = nil
}

// takeLags returns the nodes marked since the last call (or trackLags),
// each with the desired generation it lags behind, 0 when it does not
// lag (it caught up, or has no desired state any more), and clears the
// marks.
func (fs *fleetState) takeLags() map[string]uint64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.lagMarks) == 0 {
		return nil
	}
	out := fs.lagMarks
	fs.lagMarks = map[string]uint64{}
	return out
}

// lagLocked is the desired generation node lags behind, or 0.
func (fs *fleetState) lagLocked(node string) uint64 {
	if gen := fs.current[node].Generation; gen > fs.observed[node].ObservedGeneration {
		return gen
	}
	return 0
}

// desiredMessages returns the desired-state messages of those of nodes
// that have one that can be delivered (one too large was reported when it
// was decided).
func (fs *fleetState) desiredMessages(nodes []string) []mqttclient.Message {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []mqttclient.Message
	for _, node := range nodes {
		nd, ok := fs.current[node]
		if !ok {
			continue
		}
		if m := desiredMessage(node, nd); deliverable(m) {
			out = append(out, m)
		}
	}
	return out
}

// nodeNames returns the set of nodes with a current desired state.
func (fs *fleetState) nodeNames() map[string]bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	names := make(map[string]bool, len(fs.current))
	for name := range fs.current {
		names[name] = true
	}
	return names
}

// eachNode calls fn, in node name order and under the lock, with every
// node that has a current desired state and its observed state. fn must
// not call fleetState; it may take the registry's lock (the lock order).
func (fs *fleetState) eachNode(fn func(node string, current reconcile.NodeDesired, observed schema.ObservedState)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, node := range sortedKeys(fs.current) {
		fn(node, fs.current[node], fs.observed[node])
	}
}

// countNodes counts the nodes whose current desired state satisfies
// match, which runs under the lock and must not call fleetState.
func (fs *fleetState) countNodes(match func(reconcile.NodeDesired) bool) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := 0
	for _, d := range fs.current {
		if match(d) {
			n++
		}
	}
	return n
}

// observedPhases counts the observed instances per phase.
func (fs *fleetState) observedPhases() map[string]int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	phases := map[string]int{}
	for _, obs := range fs.observed {
		for _, in := range obs.Instances {
			phases[in.Phase]++
		}
	}
	return phases
}

// statusCount is the number of daemonsets with a computed status.
func (fs *fleetState) statusCount() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.status)
}

// updateObserved runs update under the lock with the generation last
// issued to node and its last observed state (had: there is one). When
// update returns keep, its result becomes node's observed state and the
// node is marked. update must not call fleetState.
func (fs *fleetState) updateObserved(node string, update func(issued uint64, old schema.ObservedState, had bool) (next schema.ObservedState, keep bool)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	old, had := fs.observed[node]
	if next, keep := update(fs.current[node].Generation, old, had); keep {
		fs.observed[node] = next
		fs.markNodeLocked(node)
	}
}

// nodeChanged records that the registry's record of node changed: it is
// stored at the next flush and decided at the next pass.
func (fs *fleetState) nodeChanged(node string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.dirtyNodes[node] = true
	fs.markNodeLocked(node)
}

// markNode records that a fact of node kept outside the state (its
// overrides in the registry) changed, for the next pass.
func (fs *fleetState) markNode(node string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.markNodeLocked(node)
}

// setCurrent makes nd node's current desired state (an operator's change
// stored outside a pass) and marks the node.
func (fs *fleetState) setCurrent(node string, nd reconcile.NodeDesired) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.setCurrentLocked(node, nd)
	fs.markNodeLocked(node)
}

// setCurrentLocked records nd as what was published to node, with the
// config topics it references.
func (fs *fleetState) setCurrentLocked(node string, nd reconcile.NodeDesired) {
	old := fs.current[node]
	fs.topics.replace(node, old.ConfigMaps, old.Secrets, nd.ConfigMaps, nd.Secrets)
	fs.current[node] = nd
	fs.markLagLocked(node)
}

// deleteNode records the operator's deletion of node, whose stored empty
// desired state is nd: it is no longer stored by the flush, its empty
// state is published once and it is then forgotten (commitDecision). The
// node is marked; the config topics it no longer references are cleared
// at the next pass.
func (fs *fleetState) deleteNode(node string, nd reconcile.NodeDesired) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.dirtyNodes, node)
	fs.deletedNodes[node] = true
	fs.setCurrentLocked(node, nd)
	fs.markNodeLocked(node)
}

// deletedAmong reports whether desired holds a node the operator deleted.
func (fs *fleetState) deletedAmong(desired map[string]reconcile.NodeDesired) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for node := range fs.deletedNodes {
		if _, ok := desired[node]; ok {
			return true
		}
	}
	return false
}

// takeDirtyNodes returns the nodes whose record must be stored and clears
// the set.
func (fs *fleetState) takeDirtyNodes() map[string]bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dirty := fs.dirtyNodes
	fs.dirtyNodes = map[string]bool{}
	return dirty
}

// redirtyNodes puts back nodes whose records could not be stored.
func (fs *fleetState) redirtyNodes(nodes []string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, node := range nodes {
		fs.dirtyNodes[node] = true
	}
}

// commitDecision records a stored decision, in one critical section:
// forget's nodes are dropped, desired's states become current, and each
// change is handed to to (the decider), which plans those nodes again as
// a mark would. It returns the config topic messages that bring the
// published topics in line with the new desired states, and changed false
// when there was nothing to commit (no desired state, no topic to compare).
func (fs *fleetState) commitDecision(forget []string, desired map[string]reconcile.NodeDesired, to committer) (publish, clear []mqttclient.Message, changed bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, node := range forget {
		fs.setCurrentLocked(node, reconcile.NodeDesired{})
		delete(fs.current, node)
		delete(fs.observed, node)
		delete(fs.deletedNodes, node)
		to.Forget(node)
	}
	if len(desired) == 0 && !fs.topics.pending() {
		return nil, nil, false
	}
	for node, nd := range desired {
		fs.setCurrentLocked(node, nd)
		to.Commit(node, nd)
	}
	publish, clear = fs.configTopicsLocked()
	return publish, clear, true
}
