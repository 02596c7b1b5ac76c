package fault

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkInterval is how often the invariant checker samples the fleet.
const checkInterval = 50 * time.Millisecond

// checker samples every agent's runtime while faults happen and records
// each violation of:
//
//	(a) a node runs two instances of the daemonset, other than a surge pair
//	    (two revisions, only when surge is allowed);
//	(b) more reachable nodes without a running instance than maxUnavailable,
//	    beyond the nodes already without one when the budget was set. Only
//	    reachable nodes count: a node offline within the grace period counts
//	    as unavailable for the controller, and so does one offline longer
//	    that was moved and not yet seen on the target, which only makes the
//	    controller stricter than this check;
//	(mono) a node that ran only the target revision runs an older one again.
type checker struct {
	t    *testing.T
	f    *fleet
	stop chan struct{}
	done chan struct{}

	mu             sync.Mutex // guards the fields below
	surge          bool
	budgetOn       bool
	maxUnavailable int
	baseline       map[string]bool // nodes unavailable when the budget was set
	target         string          // revision nodes must not leave once on it
	onTarget       map[string]bool
	samples        int
	peak           int // most budget-counted unavailable nodes in one sample
	violations     []string
}

func startChecker(t *testing.T, f *fleet) *checker {
	c := &checker{t: t, f: f, stop: make(chan struct{}), done: make(chan struct{}), onTarget: map[string]bool{}}
	go c.loop()
	t.Cleanup(c.finish)
	return c
}

// budget turns invariant (b) on with maxUnavailable nodes (surge allows
// surge pairs), counting from the nodes unavailable right now.
func (c *checker) budget(maxUnavailable int, surge bool) {
	base := map[string]bool{}
	for _, a := range c.f.agents {
		if len(a.running()) == 0 {
			base[a.name] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budgetOn, c.maxUnavailable, c.surge, c.baseline = true, maxUnavailable, surge, base
}

// forward makes every node that runs only revision target keep to it.
func (c *checker) forward(target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target, c.onTarget = target, map[string]bool{}
}

func (c *checker) loop() {
	defer close(c.done)
	tick := time.NewTicker(checkInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			c.sample()
		}
	}
}

// down reports, for each agent, whether it is reachable and runs no
// instance: unavailable, as invariant (b) counts.
func (c *checker) down() map[string]bool {
	out := make(map[string]bool, len(c.f.agents))
	for _, a := range c.f.agents {
		out[a.name] = a.reachable() && len(a.running()) == 0
	}
	return out
}

// sample checks the invariants once. A look at every agent is not one
// instant: the fleet moves while it goes through the agents in order,
// and a rollout moves in the same order, so one pass may see a node that
// became available a moment later as still down, and the node the
// controller moved in its place as down already: one more than were ever
// down at once. So the budget counts only nodes down in two passes in a
// row, which were all down at the instant between them (a node does not
// go down, up and down again within a pass); a real excess lasts as long
// as a container start, many samples.
func (c *checker) sample() {
	c.mu.Lock()
	surge, budgetOn, maxUnavailable, baseline, target := c.surge, c.budgetOn, c.maxUnavailable, c.baseline, c.target
	c.mu.Unlock()
	var wasDown map[string]bool
	if budgetOn {
		wasDown = c.down()
	}
	var bad []string
	unavailable := []string{}
	var onTarget []string
	for _, a := range c.f.agents {
		reachable := a.reachable()
		in := a.running()
		bad = append(bad, pairViolations(a.name, in, surge)...)
		if budgetOn && reachable && len(in) == 0 && wasDown[a.name] && !baseline[a.name] {
			unavailable = append(unavailable, a.name)
		}
		if target == "" {
			continue
		}
		only := len(in) > 0
		for _, i := range in {
			only = only && i.revision == target
		}
		c.mu.Lock()
		was := c.onTarget[a.name]
		c.mu.Unlock()
		if only {
			onTarget = append(onTarget, a.name)
		} else if was && len(in) > 0 {
			bad = append(bad, fmt.Sprintf("node %s went back from %s to %v", a.name, target, in))
		}
	}
	if budgetOn && len(unavailable) > maxUnavailable {
		bad = append(bad, fmt.Sprintf("%d reachable nodes unavailable, budget %d: %v", len(unavailable), maxUnavailable, unavailable))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples++
	if budgetOn {
		c.peak = max(c.peak, len(unavailable))
	}
	if target == c.target {
		for _, n := range onTarget {
			c.onTarget[n] = true
		}
	}
	for _, b := range bad {
		if len(c.violations) < 50 {
			c.violations = append(c.violations, time.Now().Format("15:04:05.000")+" "+b)
		}
	}
}

// pairViolations checks invariant (a) on one node's running instances.
func pairViolations(node string, in []instance, surge bool) []string {
	byDS := map[string]map[string]int{}
	for _, i := range in {
		if byDS[i.daemonSet] == nil {
			byDS[i.daemonSet] = map[string]int{}
		}
		byDS[i.daemonSet][i.revision]++
	}
	var out []string
	for ds, revs := range byDS {
		for rev, n := range revs {
			if n > 1 {
				out = append(out, fmt.Sprintf("node %s runs %d instances of %s revision %s", node, n, ds, rev))
			}
		}
		if len(revs) > 2 || len(revs) == 2 && !surge {
			keys := make([]string, 0, len(revs))
			for r := range revs {
				keys = append(keys, r)
			}
			sort.Strings(keys)
			out = append(out, fmt.Sprintf("node %s runs %s at revisions %s without surge", node, ds, strings.Join(keys, ",")))
		}
	}
	return out
}

// finish stops sampling and fails the test on any violation; safe to call
// twice.
func (c *checker) finish() {
	select {
	case <-c.stop:
		return
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.Logf("invariant checker: %d samples, peak %d unavailable reachable nodes (budget %d)", c.samples, c.peak, c.maxUnavailable)
	for _, v := range c.violations {
		c.t.Errorf("invariant violated: %s", v)
	}
}
