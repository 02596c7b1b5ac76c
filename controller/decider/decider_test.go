package decider

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// world models the controller around a Decider: the daemonsets and their
// persisted rollout state, every node's facts, and agents that report
// what they were asked to run. Each event feeds the decider only what it
// touched, as the controller's marks do.
type world struct {
	t         *testing.T
	r         *rand.Rand
	now       time.Time
	ds        map[string]DaemonSet
	nodes     map[string]Node
	cfg       reconcile.Configs
	revisions int
}

func newWorld(t *testing.T, r *rand.Rand) *world {
	w := &world{t: t, r: r, now: t0, ds: map[string]DaemonSet{}, nodes: map[string]Node{}}
	for i := range 1 + r.IntN(4) {
		w.ds[fmt.Sprintf("default/ds-%d", i)] = w.randomDaemonSet(fmt.Sprintf("ds-%d", i))
	}
	for i := range 1 + r.IntN(25) {
		w.nodes[fmt.Sprintf("n%02d", i)] = w.randomNode(fmt.Sprintf("n%02d", i))
	}
	return w
}

func (w *world) randomDaemonSet(name string) DaemonSet {
	r := w.r
	spec := schema.DaemonSetSpec{MinReadySeconds: int32(r.IntN(2) * 30)}
	switch r.IntN(3) {
	case 1:
		spec.Template.Spec.NodeSelector = map[string]string{"role": "edge"}
	case 2:
		spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
	}
	if r.IntN(2) == 0 {
		tol := schema.Toleration{Key: "dedicated", Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute}
		if r.IntN(2) == 0 {
			tol.TolerationSeconds = ptr(int64(60 * r.IntN(5)))
		}
		spec.Template.Spec.Tolerations = append(spec.Template.Spec.Tolerations, tol)
	}
	spec.Template.Spec.Containers = []schema.Container{{Name: "c", Image: "busybox"}}
	spec.UpdateStrategy.RollingUpdate = &schema.RollingUpdateDaemonSet{MaxUnavailable: ptr(schema.FromInt(int32(1 + r.IntN(3))))}
	if r.IntN(3) == 0 {
		spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(schema.FromInt(1))
		spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(schema.FromInt(0))
	}
	if r.IntN(4) == 0 {
		spec.UpdateStrategy.Type = schema.OnDeleteStrategy
	}
	if r.IntN(3) == 0 {
		spec.Rollout = &schema.RolloutPolicy{ProgressDeadlineSeconds: ptr(int32(60 * (1 + r.IntN(3))))}
		if r.IntN(2) == 0 {
			spec.Rollout.FailureThreshold = ptr(schema.FromInt(int32(1 + r.IntN(2))))
			spec.Rollout.AutoRollback = r.IntN(2) == 0
		}
		if r.IntN(3) == 0 {
			spec.Rollout.Canary = &schema.CanaryPolicy{Nodes: ptr(schema.FromInt(1)), AutoPromoteSeconds: int32(30 * r.IntN(2))}
		}
	}
	if r.IntN(2) == 0 {
		if spec.Rollout == nil {
			spec.Rollout = &schema.RolloutPolicy{}
		}
		spec.Rollout.UpdateLockStaleAfterSeconds = ptr(int32(30 * r.IntN(3)))
	}
	if r.IntN(3) == 0 {
		if spec.Rollout == nil {
			spec.Rollout = &schema.RolloutPolicy{}
		}
		spec.Rollout.MaxUnavailablePerTopology = &schema.TopologyBudget{TopologyKey: "zone", MaxUnavailable: ptr(schema.FromInt(1))}
		if r.IntN(2) == 0 {
			spec.Rollout.MaintenanceWindows = []schema.MaintenanceWindow{
				{Schedule: "*/2 * * * *", Duration: "1m", NodeSelector: map[string]string{"role": "edge"}},
				{Schedule: "*/5 * * * *", Duration: "2m", TimeZone: "Europe/Berlin"},
			}
		}
	}
	randomPrefetch(r, &spec)
	ds := &schema.DaemonSet{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionApps, Kind: schema.KindDaemonSet},
		Metadata: schema.ObjectMeta{Name: name, Namespace: "default"},
		Spec:     spec,
	}
	p, err := placement.Compile(ds)
	require.NoError(w.t, err)
	w.revisions++
	return DaemonSet{Key: ds.Key(), Policy: p, Revision: fmt.Sprintf("rev%d", w.revisions),
		MinReadySeconds: spec.MinReadySeconds, Strategy: rollout.FromSpec(&spec, 40*time.Second)}
}

func (w *world) randomNode(name string) Node {
	r := w.r
	m := schema.Node{Name: name, Labels: map[string]string{}, Unschedulable: r.IntN(6) == 0}
	if r.IntN(3) > 0 {
		m.Labels["role"] = []string{"edge", "gateway"}[r.IntN(2)]
	}
	if r.IntN(3) > 0 {
		m.Labels["zone"] = []string{"a", "b"}[r.IntN(2)]
	}
	if r.IntN(4) == 0 {
		m.Taints = append(m.Taints, schema.Taint{Key: "dedicated", Effect: schema.TaintNoExecute, TimeAdded: ptr(w.now)})
	}
	if r.IntN(4) > 0 {
		m.Labels[schema.LabelPrefetch] = "true"
	}
	n := Node{Name: name, Model: &m, Online: r.IntN(5) > 0}
	if !n.Online {
		n.OfflineSince = w.now.Add(-time.Duration(r.IntN(120)) * time.Second)
	}
	if old, ok := w.nodes[name]; ok {
		n.Current, n.HasCurrent, n.Observed, n.Prefetch = old.Current, old.HasCurrent, old.Observed, old.Prefetch
	}
	return n
}

// feedAll gives a fresh decider everything: what a full pass decides on.
func (w *world) feedAll(d *Decider) {
	d.SetConfigs(w.cfg)
	for _, key := range slices.Sorted(maps.Keys(w.ds)) {
		d.SetDaemonSet(w.ds[key])
	}
	for _, name := range slices.Sorted(maps.Keys(w.nodes)) {
		d.SetNode(w.nodes[name])
	}
	d.MarkAll()
}

// event changes one random thing and feeds inc what it touched.
func (w *world) event(inc *Decider) {
	r := w.r
	names := slices.Sorted(maps.Keys(w.nodes))
	keys := slices.Sorted(maps.Keys(w.ds))
	pickNode := func() string { return names[r.IntN(len(names))] }
	switch k := r.IntN(100); {
	case k < 25 && len(names) > 0: // agents report what they were asked
		name := pickNode()
		n := w.nodes[name]
		if r.IntN(3) > 0 { // else a report of prefetches alone
			n.Observed = w.report(n)
		}
		n.Prefetch = w.reportPrefetch(n)
		w.setNode(inc, n)
	case k < 35 && len(names) > 0: // new labels, taints, cordon
		w.setNode(inc, w.randomNode(pickNode()))
	case k < 45 && len(names) > 0: // presence
		n := w.nodes[pickNode()]
		n.Online = !n.Online
		n.OfflineSince = time.Time{}
		if !n.Online {
			n.OfflineSince = w.now
		}
		w.setNode(inc, n)
	case k < 50: // a node joins
		w.setNode(inc, w.randomNode(fmt.Sprintf("n%02d", 30+r.IntN(20))))
	case k < 54 && len(names) > 0: // the operator deletes a node
		n := w.nodes[pickNode()]
		n.Model, n.Deleted = nil, true
		if n.HasCurrent {
			n.Current = reconcile.NodeDesired{Generation: n.Current.Generation + 1, Instances: []schema.DesiredInstance{}}
		}
		w.setNode(inc, n)
	case k < 62 && len(keys) > 0: // a new revision
		ds := w.ds[keys[r.IntN(len(keys))]]
		w.revisions++
		ds.Revision = fmt.Sprintf("rev%d", w.revisions)
		w.setDaemonSet(inc, ds)
	case k < 66 && len(keys) > 0: // a new placement and strategy
		key := keys[r.IntN(len(keys))]
		ds := w.randomDaemonSet(key[len("default/"):])
		ds.Rollout, ds.Revision = w.ds[key].Rollout, w.ds[key].Revision
		if r.IntN(2) == 0 { // the strategy alone (a budget, windows)
			ds.Policy, ds.MinReadySeconds = w.ds[key].Policy, w.ds[key].MinReadySeconds
		}
		w.setDaemonSet(inc, ds)
	case k < 70 && len(keys) > 0: // pause, resume, promote, override stale locks
		ds := w.ds[keys[r.IntN(len(keys))]]
		st := ds.Rollout
		switch r.IntN(4) {
		case 3:
			st, _ = st.OverrideStaleLocks()
		case 0:
			st.OperatorPaused = true
		case 1:
			st.OperatorPaused, st.Paused, st.PauseReason, st.Failed = false, false, "", nil
		case 2:
			st.CanaryPromoted = true
		}
		ds.Rollout = st
		w.setDaemonSet(inc, ds)
	case k < 72: // a daemonset is created
		ds := w.randomDaemonSet(fmt.Sprintf("ds-%d", 5+r.IntN(3)))
		w.setDaemonSet(inc, ds)
	case k < 74 && len(keys) > 0: // or deleted
		key := keys[r.IntN(len(keys))]
		delete(w.ds, key)
		inc.RemoveDaemonSet(key)
	case k < 76 && len(keys) > 0: // orphaned
		ds := w.ds[keys[r.IntN(len(keys))]]
		ds.Orphan = true
		w.setDaemonSet(inc, ds)
	case k < 80:
		w.configs(inc)
	default: // the clock alone
		w.now = w.now.Add(time.Duration(r.IntN(90)) * time.Second)
	}
}

func (w *world) setNode(inc *Decider, n Node) {
	if n.Model == nil && !n.HasCurrent {
		delete(w.nodes, n.Name)
	} else {
		w.nodes[n.Name] = n
	}
	inc.SetNode(n)
}

func (w *world) setDaemonSet(inc *Decider, ds DaemonSet) {
	w.ds[ds.Key] = ds
	inc.SetDaemonSet(ds)
}

// configs gives revisions random references to config objects.
func (w *world) configs(inc *Decider) {
	c := reconcile.Configs{Refs: map[string]schema.ConfigRefs{}, ConfigMaps: map[string]string{}}
	for _, ds := range w.ds {
		if w.r.IntN(2) == 0 {
			c.Refs[ds.Revision] = schema.ConfigRefs{ConfigMaps: []string{"cfg"}}
		}
	}
	c.ConfigMaps["default/cfg"] = fmt.Sprintf("h%d", w.r.IntN(3))
	w.cfg = c
	inc.SetConfigs(c)
}

// report is what n's agent reports: each instance it was asked to run,
// mostly ready.
func (w *world) report(n Node) []schema.InstanceStatus {
	var out []schema.InstanceStatus
	for _, in := range n.Current.Instances {
		st := schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Phase: schema.PhaseRunning}
		switch w.r.IntN(6) {
		case 0:
			st.Phase = schema.PhaseCrashLoopBackOff
		case 1:
			st.Phase = schema.PhaseFailed
		default:
			st.Ready = true
			st.ReadySince = ptr(w.now.Add(-time.Duration(w.r.IntN(60)) * time.Second))
		}
		w.drawLock(&st)
		out = append(out, st)
		if w.r.IntN(5) == 0 { // an instance the agent still runs, or made up
			old := st
			old.Revision = fmt.Sprintf("rev%d", w.r.IntN(w.revisions+3))
			old.Ready, old.ReadySince = true, ptr(w.now.Add(-time.Hour))
			old.UpdateLock = nil
			w.drawLock(&old)
			out = append(out, old)
		}
	}
	return out
}

// drawLock gives one instance in three an update lock, taken a moment
// or long ago, deferred one time in three.
func (w *world) drawLock(st *schema.InstanceStatus) {
	if w.r.IntN(3) != 0 {
		return
	}
	st.UpdateLock = &schema.UpdateLockStatus{HeldSince: w.now.Add(-time.Duration(w.r.IntN(120)) * time.Second), Deferred: w.r.IntN(3) == 0}
}

// apply applies a decision as the controller does: desired states stored
// with the next generation, rollout states persisted, deleted nodes
// forgotten.
func (w *world) apply(inc *Decider, d Decision) {
	for name, nd := range d.Desired {
		n := w.nodes[name]
		n.Current, n.HasCurrent = nd, true
		w.nodes[name] = n
		inc.Commit(name, nd)
	}
	for _, name := range d.Forget {
		delete(w.nodes, name)
		inc.Forget(name)
	}
	for key, r := range d.Rollouts {
		ds, ok := w.ds[key]
		if !ok || !r.StateChanged {
			continue
		}
		ds.Rollout = r.State
		if r.State.Target != ds.Revision { // a rollback makes its target current
			ds.Revision = r.State.Target
			w.setDaemonSet(inc, ds)
			continue
		}
		w.ds[key] = ds
	}
}

// TestIncrementalAgreesWithFull: over random event sequences, every
// incremental decision equals a full one made from scratch over the same
// inputs: desired states, forgotten nodes, changes, rollout states and
// status, every daemonset's status, and when to decide again.
func TestIncrementalAgreesWithFull(t *testing.T) {
	var locks lockCounts
	forSeeds(t, []uint64{15546503270317506972, 8241316212141004908, 9602539200330895152}, func(t *testing.T, seed uint64, steps int) {
		agreeOver(t, seed, steps, &locks)
	})
	t.Logf("update locks: %+v", locks)
	require.NotZero(t, locks.held, "no node was held by its update lock")
	require.NotZero(t, locks.stale, "no update lock became stale")
	require.NotZero(t, locks.overrides, "no desired state carried an update lock override")
}

// lockCounts counts what update locks did over the decisions compared.
type lockCounts struct{ held, stale, overrides int }

func (c *lockCounts) count(d Decision) {
	for _, r := range d.Rollouts {
		c.held += r.Status.HeldByLock
		c.stale += r.Status.StaleLocks
	}
	for _, nd := range d.Desired {
		for _, in := range nd.Instances {
			if in.OverrideUpdateLock != "" {
				c.overrides++
			}
		}
	}
}

// forSeeds runs check over 300 steps of each of seeds 1 to 16, then of
// extra (seeds that once found a difference), then of two random ones;
// each seed is a subtest named after it.
func forSeeds(t *testing.T, extra []uint64, check func(t *testing.T, seed uint64, steps int)) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	seeds = append(append(seeds, extra...), rand.Uint64(), rand.Uint64())
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { check(t, seed, 300) })
	}
}

// walk runs one seeded sequence: a random world fed to an incremental
// decider, then steps times one to three events fed to it (none before
// the first step) and check, told where it is.
func walk(t *testing.T, seed uint64, steps int, check func(where string, w *world, inc *Decider)) {
	r := rand.New(rand.NewPCG(seed, 0))
	w := newWorld(t, r)
	inc := New()
	inc.chunk = 1 + r.IntN(4) // stage three split over goroutines even in small fleets
	w.feedAll(inc)
	for step := range steps {
		if step > 0 {
			for range 1 + r.IntN(3) {
				w.event(inc)
			}
		}
		check(fmt.Sprintf("seed %d step %d", seed, step), w, inc)
	}
}

// agreeOver compares, at every step of one seeded sequence, the
// incremental decision with a full one.
func agreeOver(t *testing.T, seed uint64, steps int, locks *lockCounts) {
	walk(t, seed, steps, func(where string, w *world, inc *Decider) {
		full := New()
		w.feedAll(full)
		a, b := inc.Decide(w.now), full.Decide(w.now)
		locks.count(a)
		require.Equal(t, members(full), members(inc), "%s: members", where)
		requireSameDecision(t, where, inc, a, b)
		require.Equal(t, full.Status(), inc.Status(), "%s: status", where)
		w.apply(inc, a)
		settle(t, where, w, inc)
	})
}

// settle decides again, with no new input, while a decision asks to be
// made again at once: the decisions must settle within a few rounds.
func settle(t *testing.T, where string, w *world, inc *Decider) {
	for round := 0; ; round++ {
		d := inc.Decide(w.now)
		w.apply(inc, d)
		if d.RequeueAt.IsZero() || d.RequeueAt.After(w.now) {
			return
		}
		require.Less(t, round, 4, "%s: decisions do not settle", where)
	}
}

// requireSameDecision compares the incremental decision a (of inc) with
// the full one b.
func requireSameDecision(t *testing.T, where string, inc *Decider, a, b Decision) {
	t.Helper()
	require.Equal(t, b.Desired, a.Desired, "%s: desired", where)
	require.Equal(t, b.Forget, a.Forget, "%s: forget", where)
	require.Equal(t, b.Scheduled, a.Scheduled, "%s: scheduled", where)
	require.Equal(t, b.Updated, a.Updated, "%s: updated", where)
	require.Equal(t, b.Unscheduled, a.Unscheduled, "%s: unscheduled", where)
	require.Equal(t, b.Evicted, a.Evicted, "%s: evicted", where)
	require.Equal(t, b.RequeueAt, a.RequeueAt, "%s: requeue", where)
	for key, full := range b.Rollouts {
		stepped, ok := a.Rollouts[key]
		if !ok {
			// Not stepped: nothing the full step decides may differ from
			// what the incremental one kept.
			require.True(t, full.State.Equal(inc.ds[key].tracker.State()),
				"%s: %s: state of a rollout not stepped: full %+v, incremental %+v", where, key, full.State, inc.ds[key].tracker.State())
			require.False(t, full.StateChanged, "%s: %s: full step changed the state the incremental one did not step", where, key)
			require.Empty(t, full.Events, "%s: %s: events", where, key)
			require.Empty(t, full.Assign, "%s: %s: assign", where, key)
			continue
		}
		require.True(t, full.State.Equal(stepped.State), "%s: %s: rollout state: full %+v, incremental %+v", where, key, full.State, stepped.State)
		require.Equal(t, full.Status, stepped.Status, "%s: %s: rollout status", where, key)
		require.Equal(t, full.Events, stepped.Events, "%s: %s: rollout events", where, key)
		require.Equal(t, full.Assign, stepped.Assign, "%s: %s: assign", where, key)
	}
}

// members lists, per daemonset, the nodes the decider counts as its
// rollout nodes.
func members(d *Decider) map[string][]string {
	out := map[string][]string{}
	for key, ds := range d.ds {
		for name, n := range d.nodes {
			if ds.slot < len(n.member) && n.member[ds.slot] {
				out[key] = append(out[key], name)
			}
		}
		slices.Sort(out[key])
	}
	return out
}

// TestEachPlacementDecidedOnce: within one decision no node is placed
// against a daemonset twice. Stage three assembles the nodes stage one
// placed from their kept placements, and places only the nodes stage two
// added (a rollout moved them), which stage one had not.
func TestEachPlacementDecidedOnce(t *testing.T) {
	late := 0 // decisions in which stage three placed a node stage one had not
	forSeeds(t, nil, func(t *testing.T, seed uint64, steps int) {
		walk(t, seed, steps/2, func(where string, w *world, inc *Decider) {
			decided := countDecides(inc)
			d := inc.Decide(w.now)
			total := 0
			for pair, n := range decided.done() {
				require.Equal(t, 1, n, "%s: node %s decided %d times against %s", where, pair[0], n, pair[1])
				total += n
			}
			// Stage one decides each node it keeps against every
			// daemonset it wraps; what is beyond that, stage three placed.
			if total > inc.kept.Rows()*decided.wrapped {
				late++
			}
			w.apply(inc, d)
			settle(t, where, w, inc)
		})
	})
	require.NotZero(t, late, "no decision placed a node in stage three: its path is untested")
}

// decideCounter counts, by node and daemonset, the placement decisions
// made with the policies it wraps.
type decideCounter struct {
	mu      sync.Mutex
	counts  map[[2]string]int
	wrapped int // the policies wrapped: every daemonset but the orphans
	restore func()
}

// countDecides wraps the policies of inc's daemonsets until done.
func countDecides(inc *Decider) *decideCounter {
	c := &decideCounter{counts: map[[2]string]int{}}
	saved := map[*daemonSet]reconcile.Placer{}
	for key, ds := range inc.ds {
		if ds.Policy == nil || ds.Orphan {
			continue
		}
		c.wrapped++
		saved[ds] = ds.Policy
		ds.Policy = countingPlacer{Placer: ds.Policy, key: key, c: c}
	}
	c.restore = func() {
		for ds, p := range saved {
			ds.Policy = p
		}
	}
	return c
}

// done restores the policies and returns the counts.
func (c *decideCounter) done() map[[2]string]int {
	c.restore()
	return c.counts
}

type countingPlacer struct {
	reconcile.Placer
	key string
	c   *decideCounter
}

func (p countingPlacer) Decide(node *schema.Node, now time.Time) placement.Decision {
	p.c.mu.Lock()
	p.c.counts[[2]string{node.Name, p.key}]++
	p.c.mu.Unlock()
	return p.Placer.Decide(node, now)
}
