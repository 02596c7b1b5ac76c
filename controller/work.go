package controller

import (
	"time"

	"github.com/edgeset/edgeset/controller/decider"
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

// feed gives the decider what changed since the last pass, read at now;
// with no decider yet (first pass, or after a pass that failed to store
// its decision) it builds one over everything.
func (c *Controller) feed(w work, now time.Time) {
	if c.decider == nil || w.all {
		c.decider = decider.New()
		c.decider.SetConfigs(c.state.configs())
		for _, key := range c.state.daemonSetKeys() {
			c.feedDaemonSet(key)
		}
		names := c.state.nodeNames()
		for _, st := range c.registry.States() {
			names[st.Name] = true
		}
		c.feedNodes(names, now)
		c.decider.MarkAll()
		return
	}
	if w.configs {
		c.decider.SetConfigs(c.state.configs())
	}
	for key := range w.daemonsets {
		c.feedDaemonSet(key)
	}
	for _, name := range c.decider.Due(now) {
		w.nodes[name] = true // the clock changed its model or its plan
	}
	c.feedNodes(w.nodes, now)
}

// feedDaemonSet gives the decider daemonset key as it is now.
func (c *Controller) feedDaemonSet(key string) {
	in, ok := c.state.deciderInput(key)
	if !ok {
		c.decider.RemoveDaemonSet(key)
		return
	}
	c.decider.SetDaemonSet(in)
}

// feedNodes gives the decider the facts of the named nodes as they are
// at now.
func (c *Controller) feedNodes(names map[string]bool, now time.Time) {
	for name := range names {
		n := decider.Node{Name: name}
		if model, changeAt, ok := c.registry.Model(name, now, c.cfg.NodeOfflineGrace); ok {
			n.Model, n.ModelChangeAt = model, changeAt
		}
		if st, ok := c.registry.State(name); ok {
			n.Online, n.OfflineSince = st.Online, st.OfflineSince
		}
		f := c.state.facts(name)
		n.Current, n.HasCurrent, n.Deleted, n.Observed, n.Prefetch = f.current, f.hasCurrent, f.deleted, f.observed, f.prefetch
		c.decider.SetNode(n)
	}
}
