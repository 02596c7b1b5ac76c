package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

const exporter = "monitoring/exporter"

// goOffline reports the node offline and disconnects, as an agent's will
// would.
func (n *fakeNode) goOffline() {
	p := n.presence(false)
	checkfor.Eventually(n.t, wait, 20*time.Millisecond, func() error {
		return n.client.Publish(context.Background(), p.Topic, p.Payload, true)
	})
	n.stop()
}

func TestNodeJoinGetsDaemonSet(t *testing.T) {
	tc := startController(t, Config{})
	res := tc.applyYAML(t, exporterYAML)
	require.Len(t, res, 1)
	assert.Equal(t, api.ActionCreated, res[0].Action)

	gw := startNode(t, tc.brokerURL(), tc.secret, gateway("gw-1", nil))
	sensor := startNode(t, tc.brokerURL(), tc.secret, schema.NodeStatus{Node: "sensor-1", Labels: map[string]string{"role": "sensor"}})
	gw.expectDaemonSets(exporter)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, ok := sensor.lastDesired(); !ok {
			return errors.New("sensor has no desired state yet")
		}
		return nil
	})
	sensor.expectDaemonSets()

	d, _ := gw.lastDesired()
	assert.Equal(t, "gw-1", d.Node)
	assert.Equal(t, schema.WireVersion, d.SchemaVersion)

	again := tc.applyYAML(t, exporterYAML)
	assert.Equal(t, api.ActionUnchanged, again[0].Action, "an unchanged manifest is a no-op")
}

func TestLabelChangeAddsAndRemoves(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	st := schema.NodeStatus{Node: "n1", Labels: map[string]string{"role": "sensor"}}
	n := startNode(t, tc.brokerURL(), tc.secret, st)
	n.expectDaemonSets()

	n.reannounce(gateway("n1", nil))
	n.expectDaemonSets(exporter)

	n.reannounce(st)
	n.expectDaemonSets()
}

func TestTaints(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	noSchedule := gateway("ns", nil)
	n1 := startNode(t, tc.brokerURL(), tc.secret, noSchedule)
	noExecute := gateway("ne", nil)
	n2 := startNode(t, tc.brokerURL(), tc.secret, noExecute)
	n1.expectDaemonSets(exporter)
	n2.expectDaemonSets(exporter)

	noSchedule.Taints = []schema.Taint{{Key: "maintenance", Effect: schema.TaintNoSchedule}}
	n1.reannounce(noSchedule)
	noExecute.Taints = []schema.Taint{{Key: "maintenance", Effect: schema.TaintNoExecute}}
	n2.reannounce(noExecute)
	n2.expectDaemonSets()
	n1.expectDaemonSets(exporter) // a NoSchedule taint added after placement does not evict

	// A new node with the NoSchedule taint does not get the daemon.
	fresh := gateway("fresh", nil)
	fresh.Taints = noSchedule.Taints
	n3 := startNode(t, tc.brokerURL(), tc.secret, fresh)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, ok := n3.lastDesired(); !ok {
			return errors.New("no desired state yet")
		}
		return nil
	})
	n3.expectDaemonSets()
}

func TestCordonKeepsAndOverridesWin(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	ctx := context.Background()

	yes := true
	_, err := tc.api.UpdateNode(ctx, "gw", api.NodePatch{Unschedulable: &yes})
	require.NoError(t, err)
	node, err := tc.api.GetNode(ctx, "gw")
	require.NoError(t, err)
	assert.True(t, node.Unschedulable)
	n.expectDaemonSets(exporter) // daemons tolerate unschedulable

	// An override label wins over the announcement and survives it.
	sensor := "sensor"
	_, err = tc.api.UpdateNode(ctx, "gw", api.NodePatch{Labels: map[string]*string{"role": &sensor}, Overwrite: true})
	require.NoError(t, err)
	n.expectDaemonSets()
	n.reannounce(gateway("gw", map[string]string{"extra": "1"}))
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		node, err := tc.api.GetNode(ctx, "gw")
		if err != nil || node.Labels["extra"] != "1" {
			return fmt.Errorf("re-announcement not applied yet (%v): %v", err, node.Labels)
		}
		if node.Labels["role"] != "sensor" {
			return fmt.Errorf("override lost: role=%q", node.Labels["role"])
		}
		return nil
	})
	n.expectDaemonSets()

	_, err = tc.api.UpdateNode(ctx, "gw", api.NodePatch{Labels: map[string]*string{"bad key!": &sensor}})
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 422, se.Code)
	assert.Contains(t, err.Error(), "labels[bad key!]")

	_, err = tc.api.UpdateNode(ctx, "gx", api.NodePatch{Unschedulable: &yes})
	require.ErrorIs(t, err, api.ErrNotFound)
	assert.Contains(t, err.Error(), `did you mean gw?`)
}

func TestOfflineNodeKeepsDesiredAndIsMarked(t *testing.T) {
	tc := startController(t, Config{NodeOfflineGrace: 300 * time.Millisecond})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	before, _ := n.lastDesired()
	n.goOffline()

	ctx := context.Background()
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		node, err := tc.api.GetNode(ctx, "gw")
		if err != nil {
			return err
		}
		ready := node.Condition(schema.NodeReady)
		if node.Online || ready == nil || ready.Status != schema.ConditionUnknown {
			return fmt.Errorf("node online=%t ready=%+v, want offline with Ready=Unknown", node.Online, ready)
		}
		if !hasTaint(node.Taints, schema.TaintNodeUnreachable, schema.TaintNoExecute) {
			return fmt.Errorf("taints %v, want unreachable:NoExecute", node.Taints)
		}
		return nil
	})
	ds, err := tc.api.GetDaemonSet(ctx, exporter)
	require.NoError(t, err)
	assert.Equal(t, 1, ds.Status.NodesOffline)
	d, err := tc.store.GetDesired("gw")
	require.NoError(t, err)
	assert.Equal(t, before.Generation, d.Generation, "an offline node keeps its desired state")
	assert.Len(t, d.Instances, 1)
}

func hasTaint(taints []schema.Taint, key, effect string) bool {
	for _, t := range taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func TestDeleteDaemonSetClears(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	require.NoError(t, tc.api.DeleteDaemonSet(context.Background(), exporter, false))
	n.expectDaemonSets()
	_, err := tc.api.GetDaemonSet(context.Background(), exporter)
	require.ErrorIs(t, err, api.ErrNotFound)
}

func TestDeleteDaemonSetOrphanKeepsInstances(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	gen, _ := n.lastDesired()
	require.NoError(t, tc.api.DeleteDaemonSet(context.Background(), exporter, true))
	dss, err := tc.api.ListDaemonSets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, dss)
	n.reannounce(gateway("gw", map[string]string{"x": "y"})) // any later pass
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		node, err := tc.api.GetNode(context.Background(), "gw")
		if err != nil || node.Labels["x"] != "y" {
			return fmt.Errorf("re-announcement not seen yet: %v", err)
		}
		return nil
	})
	now, _ := n.lastDesired()
	assert.Equal(t, gen.Generation, now.Generation, "orphaned instances stay in the desired state")
	n.expectDaemonSets(exporter)
}

func TestDeleteNodeClearsDesiredState(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	require.NoError(t, tc.api.DeleteNode(context.Background(), "gw"))
	n.expectDaemonSets()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, err := tc.store.GetDesired("gw"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("desired state of a deleted node still stored: %v", err)
		}
		return nil
	})
	nodes, err := tc.api.ListNodes(context.Background())
	require.NoError(t, err)
	assert.Empty(t, nodes)
}

// TestRestartLosesNothingAndRepublishes: a controller stopped and started on
// the same data directory keeps its daemonsets and every node's desired
// state with its generation, and republishes it (a fresh subscriber sees
// it even if the broker had lost its retained messages).
func TestRestartLosesNothingAndRepublishes(t *testing.T) {
	dir := t.TempDir()
	tc := startController(t, Config{DataDir: dir})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	before, _ := n.lastDesired()
	n.stop()
	tc.stop()
	require.NoError(t, removeBrokerState(dir), "simulate a broker that lost its retained messages")

	tc2 := startController(t, Config{DataDir: dir})
	dss, err := tc2.api.ListDaemonSets(context.Background())
	require.NoError(t, err)
	require.Len(t, dss, 1)
	n2 := startNode(t, tc2.brokerURL(), tc2.secret, gateway("gw", nil))
	n2.expectDaemonSets(exporter)
	after, _ := n2.lastDesired()
	assert.Equal(t, before.Generation, after.Generation, "the same desired state, republished")
	assert.Equal(t, before.Instances, after.Instances)
}

func TestApplyInvalidManifestChangesNothing(t *testing.T) {
	tc := startController(t, Config{})
	bad := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: Bad_Name}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: y}}
    spec:
      containers:
      - name: c
        imagee: x
`
	_, err := tc.api.Apply(context.Background(), "bad.yaml", []byte(bad), false)
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 422, se.Code)
	fields := map[string]bool{}
	for _, f := range se.Body.Fields {
		fields[f.Field] = true
		assert.Equal(t, "bad.yaml", f.File)
		assert.Positive(t, f.Line)
	}
	assert.True(t, fields["spec.template.spec.containers[0].imagee"], "unknown field named: %v", se.Body.Fields)
	dss, err := tc.api.ListDaemonSets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, dss)
}

func TestAPIRequiresToken(t *testing.T) {
	tc := startController(t, Config{})
	bad := api.NewClient("http://"+tc.APIAddr().String(), "wrong", nil)
	_, err := bad.ListNodes(context.Background())
	require.ErrorIs(t, err, api.ErrUnauthorized)
}

func TestSecondControllerOnSameStoreFailsFast(t *testing.T) {
	dir := t.TempDir()
	startController(t, Config{DataDir: dir})
	start := time.Now()
	_, err := New(Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.ErrorIs(t, err, store.ErrLocked)
	assert.Contains(t, err.Error(), "edgeset.db")
	assert.Less(t, time.Since(start), 30*time.Second, "fails instead of hanging")
}

// TestMalformedMessagesAreDropped: garbage on every topic the controller
// reads is counted and changes nothing.
func TestMalformedMessagesAreDropped(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	ctx := context.Background()
	for _, kind := range []string{schema.TopicStatus, schema.TopicOnline, schema.TopicObserved, schema.TopicEvents} {
		for _, payload := range []string{"not json", `{"schemaVersion":99}`, `{"schemaVersion":1,"node":"other"}`} {
			err := n.client.Publish(ctx, schema.NodeTopic("gw", kind), []byte(payload), kind != schema.TopicEvents)
			require.NoError(t, err)
		}
	}
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := counterValue(tc.metrics.messagesRejected); got < 12 {
			return fmt.Errorf("%v messages rejected, want 12", got)
		}
		return nil
	})
	node, err := tc.api.GetNode(ctx, "gw")
	require.NoError(t, err)
	assert.Equal(t, "gateway", node.Labels["role"], "the node keeps its last good status")
	n.expectDaemonSets(exporter)
}
