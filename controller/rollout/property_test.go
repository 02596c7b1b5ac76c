package rollout

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// simNode is an agent in the simulated fleet: it runs what it was last
// assigned while online, and its instances become ready after a delay.
type simNode struct {
	name      string
	online    bool
	offSince  time.Time
	running   map[string]time.Time // revision -> started
	assigned  []string
	reported  []Instance // what the controller last heard
	permaAway bool
	labels    map[string]string
	// Prefetching (prefetch_test.go): whether its agent prefetches, the
	// revision it was asked to and when, the images it holds, and the
	// prefetches the controller last heard were done.
	canPrefetch bool
	prefetching string
	askedAt     time.Time
	images      map[string]bool
	prefetched  []string
	lock        simLock // the daemon's update lock and the agent's answer to it
}

type sim struct {
	rng       *rand.Rand
	now       time.Time
	s         Strategy
	st        State
	nodes     []*simNode
	readyIn   time.Duration
	bad       string // a revision that never becomes ready
	flapProb  float64
	lateProb  float64 // an agent's report reaches the controller a step late
	lastEvent []Event
	locks     lockBehaviour // how daemons take and release update locks (locks_test.go)
}

func newSim(seed uint64, n int, s Strategy) *sim {
	sm := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e37)), now: t0, s: s, readyIn: 3 * time.Second}
	for i := range n {
		sm.nodes = append(sm.nodes, &simNode{
			name: fmt.Sprintf("n%03d", i), online: true,
			running: map[string]time.Time{"v1": t0.Add(-time.Hour)}, assigned: []string{"v1"},
		})
	}
	sm.st = State{Target: "v1", Stable: "v1", Complete: true}
	for _, n := range sm.nodes {
		n.reported = sm.observe(n)
	}
	return sm
}

// observe is what the agent reports: its running instances.
func (sm *sim) observe(n *simNode) []Instance {
	var out []Instance
	for rev, started := range n.running {
		in := Instance{Revision: rev, Phase: schema.PhaseRunning}
		n.lock.report(&in)
		if rev == sm.bad {
			in.Phase, in.Message = schema.PhaseCrashLoopBackOff, "exit 1"
		} else if !sm.now.Before(started.Add(sm.readyIn)) {
			in.Ready, in.ReadySince = true, started.Add(sm.readyIn)
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Instance) int { return compareStrings(a.Revision, b.Revision) })
	return out
}

// tick advances time, flaps links, lets online agents apply assignments.
func (sm *sim) tick() {
	sm.now = sm.now.Add(time.Second)
	for _, n := range sm.nodes {
		sm.flap(n)
		if !n.online {
			continue
		}
		sm.driveLock(n)
		if sm.deferForLock(n) {
			n.reported = sm.observe(n)
			continue
		}
		sm.apply(n)
		sm.download(n)
		if sm.rng.Float64() < sm.lateProb {
			continue // this report arrives late: the controller sees the previous one again
		}
		n.reported = sm.observe(n)
		n.prefetched = n.reportPrefetch()
	}
}

func (sm *sim) flap(n *simNode) {
	if n.permaAway {
		if n.online {
			n.online, n.offSince = false, sm.now
		}
		return
	}
	if sm.rng.Float64() >= sm.flapProb {
		return
	}
	if n.online {
		n.online, n.offSince = false, sm.now
	} else {
		n.online, n.offSince = true, time.Time{}
	}
}

func (sm *sim) apply(n *simNode) {
	for rev := range n.running {
		if !slices.Contains(n.assigned, rev) {
			delete(n.running, rev)
		}
	}
	for _, rev := range n.assigned {
		if _, ok := n.running[rev]; !ok {
			n.running[rev] = sm.now
		}
	}
}

func (sm *sim) step(t *testing.T) Decision {
	in := make([]Node, len(sm.nodes))
	for i, n := range sm.nodes {
		in[i] = Node{Name: n.name, Online: n.online, OfflineSince: n.offSince,
			Assigned: slices.Clone(n.assigned), Observed: slices.Clone(n.reported), Labels: n.labels,
			CanPrefetch: n.canPrefetch, Prefetching: n.prefetching, Prefetched: slices.Clone(n.prefetched)}
	}
	d := Step(sm.now, sm.s, sm.st, in)
	sm.checkInvariants(t, in, d)
	sm.st = restartFromStore(t, d.State)
	sm.lastEvent = append(sm.lastEvent, d.Events...)
	for _, n := range sm.nodes {
		if revs := d.Assign[n.name]; !slices.Equal(revs, n.assigned) {
			n.lock.override = sm.st.LockOverrides[n.name] // as the decider attaches it to a new assignment
		}
		n.assigned = d.Assign[n.name]
		sm.ask(n, d.Prefetch[n.name])
	}
	return d
}

// checkInvariants asserts what Step guarantees, on the controller's view.
func (sm *sim) checkInvariants(t *testing.T, in []Node, d Decision) {
	t.Helper()
	maxUnavail, maxSurge := (&pass{s: sm.s, total: len(in)}).budget()
	before := unavailableReachable(sm, in, nil)
	after := unavailableReachable(sm, in, d.Assign)
	if after > max(maxUnavail, before) {
		t.Fatalf("at %s: %d reachable nodes unavailable after the step (before %d), maxUnavailable %d",
			sm.now.Sub(t0), after, before, maxUnavail)
	}
	pairs := 0
	for node, revs := range d.Assign {
		if len(revs) > 2 || (len(revs) == 2 && maxSurge == 0) {
			t.Fatalf("node %s assigned %v without surge allowance", node, revs)
		}
		if len(revs) == 2 {
			pairs++
		}
		if len(revs) == 0 {
			t.Fatalf("node %s assigned nothing", node)
		}
	}
	if maxSurge > 0 && pairs > maxSurge {
		t.Fatalf("%d surge pairs, maxSurge %d", pairs, maxSurge)
	}
	sm.checkSchedule(t, in, d)
	sm.checkPrefetch(t, in, d)
}

// unavailableReachable counts reachable nodes that would not serve the
// daemon under assign (nil: their current assignment).
func unavailableReachable(sm *sim, in []Node, assign map[string][]string) int {
	p := &pass{now: sm.now, s: sm.s}
	count := 0
	for i := range in {
		n := &in[i]
		v := p.viewOf(n)
		if v.offline {
			continue
		}
		revs := n.Assigned
		if assign != nil {
			revs = assign[n.Name]
		}
		if !p.availableUnder(&v, revs) {
			count++
		}
	}
	return count
}

func (sm *sim) converged(rev string) bool {
	for _, n := range sm.nodes {
		if n.permaAway {
			continue
		}
		if len(n.assigned) != 1 || n.assigned[0] != rev || !n.online {
			return false
		}
		if len(n.reported) != 1 || !n.reported[0].Ready || n.reported[0].Revision != rev {
			return false
		}
	}
	return true
}

func (sm *sim) healLinks() {
	sm.flapProb = 0
	for _, n := range sm.nodes {
		if !n.permaAway {
			n.online, n.offSince = true, time.Time{}
		}
	}
}

// restartFromStore is what a controller restarted from its store reads
// back: the state as persisted (JSON).
func restartFromStore(t *testing.T, st State) State {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}

func randomStrategy(rng *rand.Rand) Strategy {
	s := Strategy{OfflineGrace: 5 * time.Second, MinReady: time.Duration(rng.IntN(3)) * time.Second}
	switch rng.IntN(4) {
	case 0:
		s.MaxUnavailable = schema.FromInt(int32(1 + rng.IntN(4)))
	case 1:
		s.MaxUnavailable = schema.FromString(fmt.Sprintf("%d%%", 1+rng.IntN(40)))
	case 2:
		s.MaxUnavailable, s.MaxSurge = schema.FromInt(0), schema.FromInt(int32(1+rng.IntN(3)))
	default:
		s.MaxUnavailable, s.MaxSurge = schema.FromInt(1), schema.FromString("20%")
	}
	return s
}

// TestPropertyRolloutConverges: over random fleets, strategies, flapping
// links, reports arriving late (the controller sees an agent's previous
// report again) and a controller that restarts from its store at every
// step, the budget and surge invariants hold at every step, and once the
// links heal every reachable node ends on the target.
func TestPropertyRolloutConverges(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			sm := newSim(seed, 5+rng.IntN(40), randomStrategy(rng))
			sm.flapProb = 0.02 * float64(rng.IntN(4))
			sm.lateProb = 0.2 * float64(rng.IntN(2))
			if rng.IntN(3) == 0 {
				sm.nodes[rng.IntN(len(sm.nodes))].permaAway = true
			}
			sm.st = sm.st.Retarget("v2")
			for range 200 {
				sm.tick()
				sm.step(t)
			}
			sm.healLinks()
			for range 400 {
				sm.tick()
				sm.step(t)
				if sm.converged("v2") {
					return
				}
			}
			t.Fatalf("not converged to v2 with strategy %+v; state %+v", sm.s, sm.st)
		})
	}
}

// TestPropertyBadRevisionRollsBack: a crash-looping revision always crosses
// the threshold, pauses, and with autoRollback the fleet converges back to
// the stable revision within the same budget.
func TestPropertyBadRevisionRollsBack(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			s := randomStrategy(rng)
			s.ProgressDeadline = 10 * time.Second
			s.FailureThreshold = ptr(schema.FromInt(int32(1 + rng.IntN(2))))
			s.AutoRollback = true
			sm := newSim(seed, 5+rng.IntN(30), s)
			sm.lateProb = 0.2
			sm.bad = "v2"
			sm.st = sm.st.Retarget("v2")
			for range 600 {
				sm.tick()
				sm.step(t)
				if sm.st.RolledBackFrom == "v2" && sm.converged("v1") {
					if !hasReason(sm.lastEvent, ReasonPaused) || !hasReason(sm.lastEvent, ReasonRollback) {
						t.Fatalf("rolled back without the paused and rollback events: %+v", sm.lastEvent)
					}
					return
				}
			}
			t.Fatalf("bad revision did not roll back: state %+v", sm.st)
		})
	}
}

func hasReason(events []Event, reason string) bool {
	return slices.ContainsFunc(events, func(e Event) bool { return e.Reason == reason })
}
