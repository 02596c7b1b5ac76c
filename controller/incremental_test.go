package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// The tests of this file run the controller with an hour between full
// passes, so only the marks (and the decider's own instants) can make a
// change take effect: a missed mark shows as a decision that does not
// follow within seconds.

// noSafetyNet is a configuration whose full pass never comes in a test.
func noSafetyNet(clock func() time.Time) Config {
	return Config{FullPassInterval: time.Hour, Clock: clock}
}

// settled is nil when a decision made from scratch over the controller's
// working state, at the instant of its last pass, changes no desired
// state and gives every daemonset the status the incremental passes
// published; and when the store holds the working state's desired states.
// Marks still waiting for a pass make it return an error (try again).
func settled(tc *testController) error {
	tc.passMu.Lock()
	defer tc.passMu.Unlock()
	if w := tc.state.takeWork(); !w.empty() {
		tc.state.mu.Lock()
		tc.state.work = mergeWork(tc.state.work, w)
		tc.state.mu.Unlock()
		return fmt.Errorf("marks waiting for a pass: %+v", w)
	}
	if tc.decider == nil {
		return fmt.Errorf("no decider: the last pass failed")
	}
	now := tc.lastPass
	saved := tc.decider
	tc.decider = nil
	tc.feed(newWork(), now)
	fresh := tc.decider.Decide(now)
	freshStatus := tc.decider.Status()
	tc.decider = saved
	for _, node := range sortedKeys(fresh.Desired) {
		cur, _ := tc.state.currentOf(node)
		return fmt.Errorf("a full pass would publish %v to node %s, which the incremental passes left at %v (generation %d)",
			instanceNames(fresh.Desired[node]), node, instanceNames(cur), cur.Generation)
	}
	if len(fresh.Forget) > 0 {
		return fmt.Errorf("a full pass would forget nodes %v", fresh.Forget)
	}
	published := tc.state.views()
	for _, v := range published {
		key := v.entry.rec.Key()
		want, ok := freshStatus[key]
		if !ok {
			continue
		}
		if fmt.Sprint(want.DaemonSetStatus) != fmt.Sprint(v.status.DaemonSetStatus) || fmt.Sprint(want.Rollout) != fmt.Sprint(v.status.Rollout) {
			return fmt.Errorf("daemonset %s: a full pass gives status %+v, the incremental passes %+v", key, want, v.status)
		}
	}
	return storeHoldsCurrent(tc)
}

// storeHoldsCurrent is nil when the store's desired states are the
// working state's.
func storeHoldsCurrent(tc *testController) error {
	recs, err := tc.store.ListDesired()
	if err != nil {
		return err
	}
	stored := map[string]bool{}
	for _, rec := range recs {
		stored[rec.Node] = true
		cur, ok := tc.state.currentOf(rec.Node)
		if !ok || cur.Generation != rec.Generation || !slices.Equal(cur.Instances, rec.Instances) {
			return fmt.Errorf("node %s: store holds generation %d %v, working state %d %v (known %t)",
				rec.Node, rec.Generation, rec.Instances, cur.Generation, cur.Instances, ok)
		}
	}
	for node := range tc.state.nodeNames() {
		if !stored[node] {
			return fmt.Errorf("node %s has a desired state the store does not hold", node)
		}
	}
	return nil
}

func mergeWork(a, b work) work {
	for n := range b.nodes {
		a.nodes[n] = true
	}
	for k := range b.daemonsets {
		a.daemonsets[k] = true
	}
	a.configs = a.configs || b.configs
	a.all = a.all || b.all
	return a
}

func instanceNames(nd reconcile.NodeDesired) []string {
	var out []string
	for _, in := range nd.Instances {
		out = append(out, in.DaemonSet+"@"+in.Revision)
	}
	return out
}

// requireSettled waits until settled holds.
func requireSettled(t *testing.T, tc *testController) {
	t.Helper()
	checkfor.Eventually(t, wait, 25*time.Millisecond, func() error { return settled(tc) })
}

// tick moves the controller's clock and wakes the loop, as its timer would
// at that instant.
func tick(tc *testController, clock *testClock, d time.Duration) {
	clock.advance(d)
	tc.wake()
}

// onRevision waits until n's last desired state runs exactly revs.
func onRevision(t *testing.T, n *fakeNode, revs ...string) {
	t.Helper()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := n.revisions(); !slices.Equal(got, revs) {
			return fmt.Errorf("node %s runs %v, want %v", n.name, got, revs)
		}
		return nil
	})
}

// countOn counts the nodes whose last desired state runs exactly rev.
func countOn(nodes []*fakeNode, rev string) int {
	n := 0
	for _, node := range nodes {
		if slices.Equal(node.revisions(), []string{rev}) {
			n++
		}
	}
	return n
}

// reportedReady waits until the controller holds a ready report of rev
// from every node that runs it.
func reportedReady(t *testing.T, tc *testController, nodes []*fakeNode, rev string) {
	t.Helper()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		for _, n := range nodes {
			if !slices.Contains(n.revisions(), rev) {
				continue
			}
			obs, _ := tc.state.observedOf(n.name)
			i := slices.IndexFunc(obs.Instances, func(in schema.InstanceStatus) bool { return in.Revision == rev && in.Ready })
			if i < 0 {
				return fmt.Errorf("node %s has not reported %s ready", n.name, rev)
			}
		}
		return nil
	})
}

// TestIncrementalMinReadySecondsMovesRollout: a rolling update whose
// instances count as available only minReadySeconds after they are
// ready moves its next batch when the controller's clock gets there,
// with no event but the clock.
func TestIncrementalMinReadySecondsMovesRollout(t *testing.T) {
	clock := newTestClock()
	tc := startController(t, noSafetyNet(clock.now))
	nodes := fleet(t, tc, 3, healthy())
	minReady := "  minReadySeconds: 30\n"
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, minReady))
	for _, n := range nodes {
		n.expectDaemonSets(exporter)
	}
	v1 := nodes[0].revisions()[0]
	reportedReady(t, tc, nodes, v1)
	tick(tc, clock, 31*time.Second)
	waitRollout(t, tc, complete(v1))
	requireSettled(t, tc)

	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", rollingOne, minReady))
	v2 := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if ds.CurrentHash == v1 {
			return fmt.Errorf("still on %s", v1)
		}
		return nil
	}).CurrentHash
	for moved := 1; moved <= len(nodes); moved++ {
		checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
			if got := countOn(nodes, v2); got != moved {
				return fmt.Errorf("%d nodes on the new revision, want %d", got, moved)
			}
			return nil
		})
		reportedReady(t, tc, nodes, v2)
		requireSettled(t, tc)
		require.Equal(t, moved, countOn(nodes, v2), "the next batch waits for minReadySeconds")
		tick(tc, clock, 31*time.Second)
	}
	waitRollout(t, tc, complete(v2))
	requireSettled(t, tc)
}

// notReady runs every instance of a revision other than the good ones
// without ever being ready, the good ones healthy. The good revisions are
// known before the bad one is applied, so no report of the bad one can
// come before the node knows it is bad.
func notReady(good *[]string, n *fakeNode) func(schema.DesiredState) schema.ObservedState {
	return func(d schema.DesiredState) schema.ObservedState {
		obs := healthy()(d)
		n.mu.Lock()
		defer n.mu.Unlock()
		for i, in := range obs.Instances {
			if *good != nil && !slices.Contains(*good, in.Revision) {
				obs.Instances[i] = schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Phase: schema.PhaseRunning}
			}
		}
		return obs
	}
}

// TestIncrementalProgressDeadlineRollsBack: a revision that never gets
// ready fails at its progress deadline on the controller's clock, and the
// rollback follows with no event but the clock.
func TestIncrementalProgressDeadlineRollsBack(t *testing.T) {
	clock := newTestClock()
	tc := startController(t, noSafetyNet(clock.now))
	policy := "  rollout: {progressDeadlineSeconds: 60, failureThreshold: 1, autoRollback: true}\n"
	var good []string // nil: every revision is healthy
	nodes := fleet(t, tc, 3, nil)
	for _, n := range nodes {
		n.setBehaviourWhenPlaced(notReady(&good, n))
	}
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, policy))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	requireSettled(t, tc)
	for _, n := range nodes {
		n.mu.Lock()
	}
	good = []string{v1}
	for _, n := range nodes {
		n.mu.Unlock()
	}

	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:2", rollingOne, policy))
	hist, err := tc.api.RolloutHistory(context.Background(), exporter)
	require.NoError(t, err)
	v2 := hist[len(hist)-1].Hash
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := countOn(nodes, v2); got != 1 {
			return fmt.Errorf("%d nodes on the new revision, want 1", got)
		}
		return nil
	})
	requireSettled(t, tc)
	tick(tc, clock, 61*time.Second)
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r == nil || !r.RolledBack || ds.CurrentHash != v1 {
			return fmt.Errorf("want a rollback to %s: current %s, %+v", v1, ds.CurrentHash, r)
		}
		return nil
	})
	require.Equal(t, v2, ds.Status.Rollout.RolledBackFrom)
	for _, n := range nodes {
		onRevision(t, n, v1)
	}
	requireSettled(t, tc)
}

// TestIncrementalCanaryAutoPromotes: a canary whose instances stay
// available for autoPromoteSeconds is promoted when the controller's
// clock gets there, and the rest of the fleet follows.
func TestIncrementalCanaryAutoPromotes(t *testing.T) {
	clock := newTestClock()
	tc := startController(t, noSafetyNet(clock.now))
	policy := "  rollout: {canary: {nodes: 1, autoPromoteSeconds: 60}}\n"
	nodes := fleet(t, tc, 3, healthy())
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}", policy))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	requireSettled(t, tc)

	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:2", "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}", policy))
	v2 := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if ds.CurrentHash == v1 {
			return fmt.Errorf("still on %s", v1)
		}
		return nil
	}).CurrentHash
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := countOn(nodes, v2); got != 1 {
			return fmt.Errorf("%d nodes on the new revision, want the one canary", got)
		}
		return nil
	})
	reportedReady(t, tc, nodes, v2)
	requireSettled(t, tc)
	require.Equal(t, 1, countOn(nodes, v2), "the canary waits")
	tick(tc, clock, 61*time.Second)
	waitRollout(t, tc, complete(v2))
	requireSettled(t, tc)
}

// TestIncrementalOfflineNodeDoesNotStallRollout: a node that went offline
// before a rolling update neither stalls it nor keeps its status wrong
// once its offline grace has run out on the controller's clock.
func TestIncrementalOfflineNodeDoesNotStallRollout(t *testing.T) {
	clock := newTestClock()
	cfg := noSafetyNet(clock.now)
	cfg.NodeOfflineGrace = time.Minute
	tc := startController(t, cfg)
	nodes := fleet(t, tc, 3, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	nodes[0].goOffline()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if st, _ := tc.registry.State(nodes[0].name); st.Online {
			return fmt.Errorf("node %s still online", nodes[0].name)
		}
		return nil
	})
	requireSettled(t, tc)

	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", rollingOne, ""))
	requireSettled(t, tc)
	tick(tc, clock, 61*time.Second)
	requireSettled(t, tc)
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if countOn(nodes[1:], ds.CurrentHash) != 2 {
			return fmt.Errorf("the online nodes are not on %s yet", ds.CurrentHash)
		}
		return nil
	})
	require.NotEqual(t, v1, ds.CurrentHash)
	requireSettled(t, tc)
}

// TestIncrementalConfigObjectChanges: a ConfigMap's new content, a Secret
// created, and the ConfigMap deleted each reach the desired state of the
// node whose daemonset references them (without rollOnConfigChange: the
// revision stays, the references move).
func TestIncrementalConfigObjectChanges(t *testing.T) {
	tc := startController(t, noSafetyNet(nil))
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	a.behave = healthy()
	tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"k": "1"}), agentDS(false))
	first := a.expectDesired(func(d schema.DesiredState) error {
		if len(d.Instances) != 1 || len(d.ConfigMaps) != 1 {
			return fmt.Errorf("desired %+v", d)
		}
		return nil
	})
	requireSettled(t, tc)

	tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"k": "2"}))
	a.expectDesired(func(d schema.DesiredState) error {
		if len(d.ConfigMaps) != 1 || d.ConfigMaps[0] == first.ConfigMaps[0] {
			return fmt.Errorf("config maps %v, want a new hash of agent-config", d.ConfigMaps)
		}
		return nil
	})
	requireSettled(t, tc)

	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}))
	a.expectDesired(func(d schema.DesiredState) error {
		if len(d.Secrets) != 1 {
			return fmt.Errorf("secrets %v, want api-key", d.Secrets)
		}
		return nil
	})
	requireSettled(t, tc)

	require.NoError(t, tc.api.DeleteConfigMap(context.Background(), "edge/agent-config"))
	a.expectDesired(func(d schema.DesiredState) error {
		if len(d.ConfigMaps) != 0 {
			return fmt.Errorf("config maps %v, want none", d.ConfigMaps)
		}
		return nil
	})
	requireSettled(t, tc)
}

// TestIncrementalDeletedNodeRejoins: a deleted node is cleared and
// forgotten; when its agent announces itself again it is a new node and
// gets its daemonset back.
func TestIncrementalDeletedNodeRejoins(t *testing.T) {
	tc := startController(t, noSafetyNet(nil))
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.behave = healthy()
	n.expectDaemonSets(exporter)
	requireSettled(t, tc)

	require.NoError(t, tc.api.DeleteNode(context.Background(), "gw"))
	n.expectDaemonSets()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, ok := tc.state.currentOf("gw"); ok {
			return fmt.Errorf("node gw not forgotten")
		}
		return nil
	})
	requireSettled(t, tc)

	n.stop()
	again := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	again.behave = healthy()
	again.expectDaemonSets(exporter)
	requireSettled(t, tc)
}

// TestIncrementalOrphanReapplied: a daemonset deleted leaving its
// instances (orphan) is managed again when applied again: a new template
// rolls out to the nodes that kept the old one, and a node that joins
// meanwhile gets it.
func TestIncrementalOrphanReapplied(t *testing.T) {
	tc := startController(t, noSafetyNet(nil))
	nodes := fleet(t, tc, 2, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	require.NoError(t, tc.api.DeleteDaemonSet(context.Background(), exporter, true))
	requireSettled(t, tc)
	late := startNode(t, tc.brokerURL(), tc.secret, gateway("late", nil))
	late.behave = healthy()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, ok := late.lastDesired(); !ok {
			return fmt.Errorf("late has no desired state")
		}
		return nil
	})
	require.Empty(t, late.daemonSets(), "an orphan is not placed on new nodes")
	for _, n := range nodes {
		require.Equal(t, []string{v1}, n.revisions(), "an orphan's instances stay")
	}
	requireSettled(t, tc)

	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", rollingOne, ""))
	v2 := waitRollout(t, tc, complete("")).CurrentHash
	require.NotEqual(t, v1, v2)
	for _, n := range append(nodes, late) {
		onRevision(t, n, v2)
	}
	requireSettled(t, tc)
}

// TestIncrementalStoreFailureRecovers: passes whose decision the store
// refuses (a rollout under way, a node's label changing) change nothing;
// once the disk takes writes again the controller ends where a decision
// from scratch over the same state does, with the store holding what was
// published.
func TestIncrementalStoreFailureRecovers(t *testing.T) {
	tc := startController(t, noSafetyNet(nil))
	nodes := fleet(t, tc, 3, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	tc.applyYAML(t, gatewaysOnlyYAML)
	waitRollout(t, tc, complete(""))
	for _, n := range nodes {
		n.expectDaemonSets(gatewaysOnly, exporter)
	}
	requireSettled(t, tc)

	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", rollingOne, ""))
	tc.store.FailWrites(func() error { return errDiskFull })
	nodes[2].reannounce(schema.NodeStatus{Node: nodes[2].name, Labels: map[string]string{"role": "sensor"}})
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		tc.passMu.Lock()
		defer tc.passMu.Unlock()
		if tc.decider != nil {
			return fmt.Errorf("no pass has failed yet")
		}
		return nil
	})
	tc.store.FailWrites(nil)
	v2 := waitRollout(t, tc, complete("")).CurrentHash
	nodes[2].expectDaemonSets(exporter)
	for _, n := range nodes {
		checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
			d, _ := n.lastDesired()
			if i := slices.IndexFunc(d.Instances, func(in schema.DesiredInstance) bool { return in.DaemonSet == exporter }); i < 0 || d.Instances[i].Revision != v2 {
				return fmt.Errorf("node %s runs %v, want %s at %s", n.name, d.Instances, exporter, v2)
			}
			return nil
		})
	}
	requireSettled(t, tc)
}

// gatewaysOnly runs on the nodes labelled role=gateway.
const gatewaysOnly = "files/gateways-only"

var gatewaysOnlyYAML = strings.Replace(dsYAML("gateways-only", "agent:1"), "    spec:\n", "    spec:\n      nodeSelector: {role: gateway}\n", 1)

// TestIncrementalConcurrentWriters: API writers (apply, pause and resume,
// undo, labels, instance deletions) race the passes that the fleet's
// reports drive; once they stop, the controller ends where a decision
// from scratch over the same state does. Run with -race.
func TestIncrementalConcurrentWriters(t *testing.T) {
	tc := startController(t, noSafetyNet(nil))
	nodes := fleet(t, tc, 6, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:0", "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}", ""))
	tc.applyYAML(t, gatewaysOnlyYAML)
	waitRollout(t, tc, complete(""))

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	writers := []func(i int) error{
		func(i int) error {
			_, err := tc.api.Apply(ctx, "test.yaml", []byte(exporterManifest("apps/v1", fmt.Sprintf("exporter:%d", i%4),
				"{type: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}", "")), false)
			return err
		},
		func(i int) error {
			action := []string{api.RolloutPause, api.RolloutResume, api.RolloutUndo}[i%3]
			_, err := tc.api.Rollout(ctx, exporter, api.RolloutRequest{Action: action})
			return ignore(err, api.ErrInvalid)
		},
		func(i int) error {
			role := []string{"gateway", "sensor"}[i%2]
			_, err := tc.api.UpdateNode(ctx, nodes[i%len(nodes)].name, api.NodePatch{Labels: map[string]*string{"role": &role}, Overwrite: true})
			return err
		},
		func(i int) error {
			key := []string{exporter, gatewaysOnly}[i%2]
			return ignore(tc.api.DeleteInstance(ctx, key, nodes[i%len(nodes)].name), api.ErrNotFound)
		},
	}
	errs := make(chan error, len(writers))
	for _, write := range writers {
		go func() {
			for i := 0; ; i++ {
				if err := write(i); err != nil || ctx.Err() != nil {
					errs <- ignore(err, context.DeadlineExceeded)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	for range writers {
		require.NoError(t, <-errs)
	}
	// A writer's last request can still be served after its client gave
	// up (each mutation writes its audit entry first), so a pause may land
	// after a resume sent now: resume until the rollout runs to its end.
	bg := context.Background()
	done := complete("")
	waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r != nil && r.Paused {
			if _, err := tc.api.Rollout(bg, exporter, api.RolloutRequest{Action: api.RolloutResume}); err != nil {
				return err
			}
			return errors.New("resumed the rollout")
		}
		return done(ds)
	})
	requireSettled(t, tc)
}

// ignore is nil for an error that is target (or nil), err otherwise.
func ignore(err, target error) error {
	if err == nil || errors.Is(err, target) {
		return nil
	}
	return err
}

// TestIncrementalQuietFleetStatus: the status of a rollout published to
// nodes that do not report back (offline agents, slow pulls) is that of
// the desired states published, without waiting for another event.
func TestIncrementalQuietFleetStatus(t *testing.T) {
	tc := startController(t, noSafetyNet(nil))
	nodes := fleet(t, tc, 3, nil)
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	for _, n := range nodes {
		n.expectDaemonSets(exporter)
	}
	requireSettled(t, tc)
}
