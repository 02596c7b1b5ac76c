package controller

import (
	"time"

	"github.com/edgeset/edgeset/controller/decider"
	"github.com/edgeset/edgeset/controller/reconcile"
)

// work is what changed since the last reconcile pass: the nodes and
// daemonsets an event touched, whether the config objects did, or
// whether everything must be decided again. Every change to what a pass
// decides on marks it (fleetState's mark methods); the pass takes the
// marks and feeds the decider only what they name.
type work struct {
	nodes      map[string]bool
	daemonsets map[string]bool
	configs    bool
	all        bool
}

func newWork() work {
	return work{nodes: map[string]bool{}, daemonsets: map[string]bool{}}
}

func (w work) empty() bool {
	return !w.all && !w.configs && len(w.nodes) == 0 && len(w.daemonsets) == 0
}

// markNodeLocked records that node's facts changed (its model, presence,
// observed or published state).
func (fs *fleetState) markNodeLocked(node string) { fs.work.nodes[node] = true }

// markDaemonSetLocked records that daemonset key changed (spec, revision,
// rollout state, deletion).
func (fs *fleetState) markDaemonSetLocked(key string) { fs.work.daemonsets[key] = true }

// markConfigsLocked records that a config object or a revision's
// references changed.
func (fs *fleetState) markConfigsLocked() { fs.work.configs = true }

// markAllLocked asks for a pass that decides everything from scratch.
func (fs *fleetState) markAllLocked() { fs.work.all = true }

// takeWorkLocked returns the marks and clears them.
func (fs *fleetState) takeWorkLocked() work {
	w := fs.work
	fs.work = newWork()
	return w
}

// markNode records that node's facts changed, for the next pass.
func (c *Controller) markNode(node string) {
	c.mu.Lock()
	c.state.markNodeLocked(node)
	c.mu.Unlock()
}

// feed gives the decider what changed since the last pass, read at now;
// with no decider yet (first pass, or after a pass that failed to store
// its decision) it builds one over everything.
func (c *Controller) feed(w work, now time.Time) {
	if c.decider == nil || w.all {
		c.decider = decider.New()
		c.mu.Lock()
		c.decider.SetConfigs(c.configsLocked())
		for key := range c.state.daemonsets {
			c.feedDaemonSetLocked(key)
		}
		names := map[string]bool{}
		for name := range c.state.current {
			names[name] = true
		}
		c.mu.Unlock()
		for _, st := range c.registry.States() {
			names[st.Name] = true
		}
		c.feedNodes(names, now)
		c.decider.MarkAll()
		return
	}
	c.mu.Lock()
	if w.configs {
		c.decider.SetConfigs(c.configsLocked())
	}
	for key := range w.daemonsets {
		c.feedDaemonSetLocked(key)
	}
	c.mu.Unlock()
	for _, name := range c.decider.Due(now) {
		w.nodes[name] = true // the clock changed its model or its plan
	}
	c.feedNodes(w.nodes, now)
}

// feedDaemonSetLocked gives the decider daemonset key as it is now.
func (c *Controller) feedDaemonSetLocked(key string) {
	e, ok := c.state.daemonsets[key]
	if !ok {
		c.decider.RemoveDaemonSet(key)
		return
	}
	c.decider.SetDaemonSet(decider.DaemonSet{
		Key: key, Policy: e.policy, Revision: e.rec.CurrentRevision,
		MinReadySeconds: e.rec.DaemonSet.Spec.MinReadySeconds,
		Strategy:        e.strategy, Rollout: e.rollout, Orphan: e.orphan(),
	})
}

// feedNodes gives the decider the facts of the named nodes as they are
// at now.
func (c *Controller) feedNodes(names map[string]bool, now time.Time) {
	for name := range names {
		n := decider.Node{Name: name}
		if model, changeAt, ok := c.registry.Node(name, now, c.cfg.NodeOfflineGrace); ok {
			n.Model, n.ModelChangeAt = &model, changeAt
		}
		if st, ok := c.registry.State(name); ok {
			n.Online, n.OfflineSince = st.Online, st.OfflineSince
		}
		c.mu.Lock()
		n.Current, n.HasCurrent = c.state.current[name]
		n.Deleted = c.state.deletedNodes[name]
		n.Observed = c.state.observed[name].Instances
		c.mu.Unlock()
		c.decider.SetNode(n)
	}
}

// setCurrentLocked records nd as what was published to node, with the
// config topics it references.
func (fs *fleetState) setCurrentLocked(node string, nd reconcile.NodeDesired) {
	old := fs.current[node]
	fs.topics.replace(node, old.ConfigMaps, old.Secrets, nd.ConfigMaps, nd.Secrets)
	fs.current[node] = nd
}

// forgetLocked drops a deleted node whose empty desired state was
// published.
func (fs *fleetState) forgetLocked(node string) {
	old := fs.current[node]
	fs.topics.replace(node, old.ConfigMaps, old.Secrets, nil, nil)
	delete(fs.current, node)
	delete(fs.observed, node)
	delete(fs.deletedNodes, node)
}

// commitLocked records a stored decision in the working state: the
// desired states with their generations, the daemonsets' status.
func (c *Controller) commitLocked(desired map[string]reconcile.NodeDesired) {
	for node, nd := range desired {
		c.state.setCurrentLocked(node, nd)
		c.decider.Commit(node, nd)
	}
}
