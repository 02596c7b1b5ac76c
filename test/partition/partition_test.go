// Package partition cuts a real agent off from its broker at the network
// level and heals the link again. The agent binary runs in a network
// namespace of the test's own, reaching the in-process controller over a
// veth pair, and runs its daemons on the local Docker engine; bringing the
// veth end inside the namespace down is the partition. The test needs root
// and iproute2 (it skips without them) and a Docker engine (it skips
// without one, or fails under EDGESET_REQUIRE_DOCKER=1).
package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/test/testimage"
)

// Bounds and periods of the test: generous, the machine is shared.
// Nothing asserts how long anything took.
const (
	wait        = 40 * time.Second
	poll        = 100 * time.Millisecond
	offlineWait = 2 * time.Second // the controller's NodeOfflineGrace
	keepAlive   = "2s"            // the agent's MQTT keepalive
	stopTimeout = 30 * time.Second
	// heldSamples is how many engine samples the test takes after applying
	// the new revision, still partitioned, before it heals the link.
	heldSamples = 20
)

// dsKey is the daemonset the test rolls out.
const dsKey = "partition/probe"

// TestPartitionHeal runs one agent in its own network namespace, converges
// it, partitions it from the broker, changes the daemonset while it is cut
// off, and heals the link. Throughout the partition the agent stays alive
// and its container keeps running unchanged while the controller marks the
// node offline; after the heal the node is online again and runs the new
// revision in exactly one container. The node never has two containers.
func TestPartitionHeal(t *testing.T) {
	cli := testimage.RequireDocker(t)
	imageA := testimage.Build(t)
	ns := newNetns(t)
	bin := buildAgent(t)
	ctl := startController(t, ns.hostIP)
	imageB := tagImage(t, cli, imageA) // removed after the containers
	node := testimage.Node(t, cli)     // containers removed after the agent stops
	agent := startAgent(t, ns, bin, ctl, node)
	w := &watcher{cli: cli, node: node}

	require.Equal(t, api.ActionCreated, ctl.apply(t, manifest(imageA)).Action)
	var before container.Summary
	var firstHash string
	checkfor.Eventually(t, wait, poll, func() error {
		list := w.sample(t)
		agent.requireAlive(t)
		if err := runningOne(list, imageA); err != nil {
			return err
		}
		if err := ctl.nodeOnline(t, node, true); err != nil {
			return err
		}
		ds, err := ctl.api.GetDaemonSet(t.Context(), dsKey)
		if err != nil {
			return err
		}
		if st := ds.Status; st.DesiredNumberScheduled != 1 || st.NumberReady != 1 {
			return fmt.Errorf("daemonset status %+v, want 1 scheduled and ready", st)
		}
		before, firstHash = list[0], ds.CurrentHash
		return nil
	})

	ns.setLink(t, "down")
	unchanged := func() {
		t.Helper()
		list := w.sample(t)
		agent.requireAlive(t)
		if len(list) != 1 || list[0].ID != before.ID || list[0].State != container.StateRunning {
			t.Fatalf("partitioned: node %s has %s, want %.12s still running", node, describe(list), before.ID)
		}
	}
	checkfor.Eventually(t, wait, poll, func() error {
		unchanged()
		if err := ctl.nodeOnline(t, node, false); err != nil {
			return err
		}
		ds, err := ctl.api.GetDaemonSet(t.Context(), dsKey)
		if err != nil {
			return err
		}
		if ds.Status.NodesOffline != 1 {
			return fmt.Errorf("daemonset counts %d nodes offline, want 1", ds.Status.NodesOffline)
		}
		return nil
	})

	require.Equal(t, api.ActionConfigured, ctl.apply(t, manifest(imageB)).Action)
	held := 0
	checkfor.Eventually(t, wait, poll, func() error {
		unchanged()
		held++
		ds, err := ctl.api.GetDaemonSet(t.Context(), dsKey)
		if err != nil {
			return err
		}
		if ds.CurrentHash == firstHash {
			return errors.New("controller still at the first revision")
		}
		n, err := ctl.api.GetNode(t.Context(), node)
		if err != nil {
			return err
		}
		if n.Online {
			t.Fatalf("partitioned node %s is online", node)
		}
		if n.ObservedGeneration >= n.DesiredGeneration {
			return fmt.Errorf("node %s: desired generation %d, observed %d: the change is not yet desired", node, n.DesiredGeneration, n.ObservedGeneration)
		}
		if held < heldSamples {
			return fmt.Errorf("held the partition for %d samples of %d", held, heldSamples)
		}
		return nil
	})

	ns.setLink(t, "up")
	checkfor.Eventually(t, wait, poll, func() error {
		list := w.sample(t)
		agent.requireAlive(t)
		if err := ctl.nodeOnline(t, node, true); err != nil {
			return err
		}
		if err := runningOne(list, imageB); err != nil {
			return err
		}
		if list[0].ID == before.ID {
			return fmt.Errorf("node %s still runs container %.12s", node, before.ID)
		}
		n, err := ctl.api.GetNode(t.Context(), node)
		if err != nil {
			return err
		}
		if n.ObservedGeneration != n.DesiredGeneration {
			return fmt.Errorf("node %s observed generation %d of desired %d", node, n.ObservedGeneration, n.DesiredGeneration)
		}
		ds, err := ctl.api.GetDaemonSet(t.Context(), dsKey)
		if err != nil {
			return err
		}
		if st := ds.Status; st.NumberReady != 1 || st.UpdatedNumberScheduled != 1 || st.NodesOffline != 0 {
			return fmt.Errorf("daemonset status %+v, want 1 ready and updated, none offline", st)
		}
		return nil
	})
	t.Logf("engine sampled %d times (%d while partitioned after the change), never more than one container", w.samples, held)
}

// testLogger discards logs unless EDGESET_TEST_LOG is set.
func testLogger(component string) *slog.Logger {
	if os.Getenv("EDGESET_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", component)
}

// fleetController is the in-process controller, its broker listening on
// the host's veth address only.
type fleetController struct {
	api       *api.Client
	brokerURL string
	secret    []byte
}

// startController runs a controller with its broker on a free port of
// hostIP, its API on loopback, a short offline grace and its data in a
// temporary directory; cleanup stops it.
func startController(t *testing.T, hostIP string) *fleetController {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	require.NoError(t, err)
	mqttAddr := l.Addr().String()
	require.NoError(t, l.Close())

	dir := t.TempDir()
	ctl, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: mqttAddr, APIAddr: "127.0.0.1:0", NodeOfflineGrace: offlineWait}, testLogger("controller"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done, "controller Run") })
	<-ctl.Synced()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	return &fleetController{
		api:       api.NewClient("http://"+ctl.APIAddr().String(), ctl.Token(), nil),
		brokerURL: "tcp://" + mqttAddr,
		secret:    secret,
	}
}

// apply sends a manifest and fails the test if the controller refuses it.
func (c *fleetController) apply(t *testing.T, manifest string) api.ApplyResult {
	t.Helper()
	res, err := c.api.Apply(t.Context(), "partition.yaml", []byte(manifest), false)
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0]
}

// nodeOnline reports whether the controller sees node online as want.
func (c *fleetController) nodeOnline(t *testing.T, node string, want bool) error {
	n, err := c.api.GetNode(t.Context(), node)
	if err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	if n.Online != want {
		return fmt.Errorf("node %s online %t, want %t", node, n.Online, want)
	}
	return nil
}

// tagImage tags image under a second, random tag of its repository and
// removes the tag at cleanup.
func tagImage(t *testing.T, cli *client.Client, image string) string {
	t.Helper()
	tag := fmt.Sprintf("%s:partition-%d-%d", testimage.Repository, os.Getpid(), time.Now().UnixNano())
	_, err := cli.ImageTag(t.Context(), client.ImageTagOptions{Source: image, Target: tag})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if _, err := cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove tag %s: %v", tag, err)
		}
	})
	return tag
}

// manifest is the daemonset dsKey running the test app's sleep mode from
// image, never pulled, rolling one node at a time.
func manifest(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: probe, namespace: partition}
spec:
  selector: {matchLabels: {app: probe}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: "%s", imagePullPolicy: Never, args: [sleep]}
`, image)
}

// watcher samples the engine's containers of one node and fails the test
// the moment it sees two at once. Only the test goroutine uses it.
type watcher struct {
	cli     *client.Client
	node    string
	samples int
}

// sample lists the node's containers, running or not.
func (w *watcher) sample(t *testing.T) []container.Summary {
	t.Helper()
	res, err := w.cli.ContainerList(t.Context(), client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", edgeagent.LabelNode+"="+w.node),
	})
	require.NoError(t, err)
	w.samples++
	if len(res.Items) > 1 {
		t.Fatalf("node %s has %d containers at once: %s", w.node, len(res.Items), describe(res.Items))
	}
	return res.Items
}

// runningOne reports whether list is one running container of image.
func runningOne(list []container.Summary, image string) error {
	if len(list) != 1 || list[0].State != container.StateRunning || list[0].Image != image {
		return fmt.Errorf("containers %s, want one running %s", describe(list), image)
	}
	return nil
}

// describe prints containers as short id, image and state.
func describe(list []container.Summary) string {
	s := "["
	for i, c := range list {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.12s %s %s", c.ID, c.Image, c.State)
	}
	return s + "]"
}
