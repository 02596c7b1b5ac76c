package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/edgeagent/imagefetch"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/test/testimage"
)

// prefetchManifest is daemonset e2e/camera on image, with download before
// switch; its registry is unreachable, so the agent fetches from the
// controller's image store.
func prefetchManifest(image string) string {
	return fmt.Sprintf(`apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: camera, namespace: e2e}
spec:
  selector: {matchLabels: {app: camera}}
  rollout:
    prefetch: true
  template:
    metadata: {labels: {app: camera}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: "%s", imagePullPolicy: IfNotPresent, args: [sleep]}
`, image)
}

// TestPrefetchOnDocker: on the real engine, a daemon is updated under
// spec.rollout.prefetch to an image only the controller's image store
// holds. The agent fetches it (falling back from the unreachable
// registry) while the old container runs, reports the download done, and
// only then is switched: the new image was in the engine before the old
// container stopped.
func TestPrefetchOnDocker(t *testing.T) {
	cli := testimage.RequireDocker(t)
	base := testimage.Build(t)
	f := startFleet(t, cli, 0)
	node := testimage.Node(t, cli)
	f.startAgent(t, node, func(rt *docker.Runtime) edgeagent.ImageFetcher {
		fetcher, err := imagefetch.New(imagefetch.Options{
			URL: f.apiURL, Node: node, Token: credential.NodeToken(f.secret, node),
			Dir: t.TempDir(), Loader: rt, Log: testLogger(node + "/images"),
		})
		require.NoError(t, err)
		return fetcher
	})
	f.nodes = append(f.nodes, node)
	f.waitNodes(t)
	const key = "e2e/camera"
	old, next := uniqueImage(t, cli, base, "prefetch-old"), uniqueImage(t, cli, base, "prefetch-new")
	pushFromEngine(t, f, cli, next)
	removeImage(t, cli, next)

	f.apply(t, prefetchManifest(old))
	checkfor.Eventually(t, wait, poll, func() error { return f.containersOf(t, key).running(node, old) })
	deaths := watchEvents(t, cli, make(client.Filters).Add("type", string(events.ContainerEventType)).Add("event", "die").
		Add("label", edgeagent.LabelNode+"="+node), func(m events.Message) string { return m.Actor.Attributes["image"] })
	loads := watchEvents(t, cli, make(client.Filters).Add("type", string(events.ImageEventType)).Add("event", "load"),
		func(m events.Message) string { return m.Actor.ID })
	f.apply(t, prefetchManifest(next))
	checkfor.Eventually(t, wait, poll, func() error {
		if err := f.containersOf(t, key).running(node, next); err != nil {
			return err
		}
		ds := f.daemonSet(t, key)
		if r := ds.Status.Rollout; r == nil || r.Target != ds.CurrentHash || !r.Complete {
			return fmt.Errorf("rollout %+v not complete", r)
		}
		return nil
	})

	ds := f.daemonSet(t, key)
	assert.Equal(t, &api.RolloutPrefetch{Nodes: 1, Done: 1}, ds.Status.Rollout.Prefetch)
	loaded, err := cli.ImageInspect(t.Context(), next)
	require.NoError(t, err)
	loadedAt, diedAt := loads(loaded.ID), deaths(old)
	t.Logf("image %s loaded at %s; the container of %s died at %s", next, loadedAt, old, diedAt)
	assert.True(t, loadedAt.Before(diedAt), "the new image was loaded before the old container stopped")
}

// watchEvents follows the engine's events that match filters from now;
// the function it returns gives when the event of a key (by keyOf) came,
// waiting for it a moment.
func watchEvents(t *testing.T, cli *client.Client, filters client.Filters, keyOf func(events.Message) string) func(key string) time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	res := cli.Events(ctx, client.EventsListOptions{Filters: filters})
	var mu sync.Mutex
	seen := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case m := <-res.Messages:
				mu.Lock()
				seen[keyOf(m)] = time.Unix(0, m.TimeNano)
				mu.Unlock()
			case <-res.Err:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func(key string) time.Time {
		var at time.Time
		checkfor.Eventually(t, wait, poll, func() error {
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			if at, ok = seen[key]; !ok {
				return errors.New("no event of " + key + " seen")
			}
			return nil
		})
		return at
	}
}
