package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moby/moby/api/types/container"
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

// switchProxy forwards the agent's image fetches to the controller while
// up, answers 503 while down, and remembers whether a manifest was asked
// for by digest.
type switchProxy struct {
	srv      *httptest.Server
	up       atomic.Bool
	byDigest atomic.Bool
}

func newSwitchProxy(t *testing.T, upstream string) *switchProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	require.NoError(t, err)
	p := &switchProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.up.Load() {
			http.Error(w, `{"message":"controller unreachable (test proxy down)"}`, http.StatusServiceUnavailable)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/manifests") && r.URL.Query().Get("digest") != "" {
			p.byDigest.Store(true)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// TestPinnedImages: a revision pins the image pushed to the controller;
// an engine holding other content under its tag is refused (Failed,
// ImageDigestMismatch, a node event, no container) while the pinned image
// cannot be fetched; with the tampered tag removed and the controller
// reachable the image is fetched by digest and runs; a tag moved onto
// other content later does not change what runs.
func TestPinnedImages(t *testing.T) {
	cli := testimage.RequireDocker(t)
	base := testimage.Build(t)
	var pinnedID string
	t.Cleanup(func() { // after the containers are gone: the pinned content may be left untagged
		if pinnedID != "" {
			removeImage(t, cli, pinnedID)
		}
	})
	f := startFleet(t, cli, 0)
	proxy := newSwitchProxy(t, f.apiURL)
	node := testimage.Node(t, cli)
	f.startAgent(t, node, func(rt *docker.Runtime) edgeagent.ImageFetcher {
		fetcher, err := imagefetch.New(imagefetch.Options{
			URL: proxy.srv.URL, Node: node, Token: credential.NodeToken(f.secret, node),
			Dir: t.TempDir(), Loader: rt, Log: testLogger(node + "/images"),
		})
		require.NoError(t, err)
		return fetcher
	})
	f.nodes = append(f.nodes, node)
	f.waitNodes(t)
	ctx := t.Context()

	image := uniqueImage(t, cli, base, "pinned")
	tamper := uniqueImage(t, cli, base, "tamper")
	pushed := pushFromEngine(t, f, cli, image)
	pinnedID = imageID(t, cli, image)
	tamperID := imageID(t, cli, tamper)
	removeImage(t, cli, image)
	_, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: tamper, Target: image})
	require.NoError(t, err, "the engine's tag now names other content")

	const key = "e2e/pinned"
	f.apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: pinned, namespace: e2e}
spec:
  selector: {matchLabels: {app: pinned}}
  template:
    metadata: {labels: {app: pinned}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: "%s", imagePullPolicy: IfNotPresent, args: [sleep]}
`, image))
	revs, err := f.api.RolloutHistory(ctx, key)
	require.NoError(t, err)
	require.Len(t, revs, 1)
	require.Len(t, revs[0].Pins, 1)
	assert.Equal(t, pushed.Digest, revs[0].Pins[0].Digest, "the manifest digest the store serves")
	assert.Equal(t, pinnedID, revs[0].Pins[0].Config, "the config digest: the image ID the engine reports")

	// Refused: other content under the tag, the pinned image unreachable.
	checkfor.Eventually(t, wait, poll, func() error {
		in, err := instanceOf(f, key, node)
		if err != nil {
			return err
		}
		if in.Phase != "Failed" || !strings.Contains(in.Message, "image digest mismatch") {
			return fmt.Errorf("instance %s %s, want Failed with an image digest mismatch", in.Phase, in.Message)
		}
		for _, want := range []string{image, tamperID, pinnedID} {
			if !strings.Contains(in.Message, want) {
				return fmt.Errorf("message %q lacks %s", in.Message, want)
			}
		}
		return nil
	})
	checkfor.Eventually(t, wait, poll, func() error { return hasEvent(f, "node/"+node, "ImageDigestMismatch") })
	assert.Empty(t, f.containersOf(t, key)[node], "nothing of the tampered image runs")

	// The tampered tag removed, the controller reachable: fetched by
	// digest, and the pinned content runs.
	_, err = cli.ImageRemove(ctx, image, client.ImageRemoveOptions{})
	require.NoError(t, err)
	proxy.up.Store(true)
	checkfor.Eventually(t, wait, poll, func() error { return runningID(f.containersOf(t, key), node, pinnedID) })
	assert.True(t, proxy.byDigest.Load(), "the manifest was fetched by digest")
	assert.Equal(t, pinnedID, imageID(t, cli, image), "the tag names the pinned content again")

	// The tag moved onto other content while the daemon runs, and the
	// container removed: the agent recreates it from the pinned content,
	// by its ID.
	_, err = cli.ImageTag(ctx, client.ImageTagOptions{Source: tamper, Target: image})
	require.NoError(t, err)
	before := f.containersOf(t, key)[node]
	require.Len(t, before, 1)
	_, err = cli.ContainerRemove(ctx, before[0].ID, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	checkfor.Eventually(t, wait, poll, func() error {
		snap := f.containersOf(t, key)
		if list := snap[node]; len(list) == 1 && list[0].ID == before[0].ID {
			return fmt.Errorf("container %.12s not recreated yet", list[0].ID)
		}
		return runningID(snap, node, pinnedID)
	})
}

// imageID is the engine's ID of image.
func imageID(t *testing.T, cli *client.Client, image string) string {
	t.Helper()
	res, err := cli.ImageInspect(t.Context(), image)
	require.NoError(t, err)
	return res.ID
}

// instanceOf is the instance of daemonset key on node, as the API lists it.
func instanceOf(f *fleet, key, node string) (api.Instance, error) {
	insts, err := f.api.ListInstances(context.Background())
	if err != nil {
		return api.Instance{}, err
	}
	for _, in := range insts {
		if in.DaemonSet == key && in.Node == node {
			return in, nil
		}
	}
	return api.Instance{}, fmt.Errorf("no instance of %s on %s yet", key, node)
}

// hasEvent reports whether the controller recorded an event of reason for
// object.
func hasEvent(f *fleet, object, reason string) error {
	evs, err := f.api.Events(context.Background(), api.EventFilter{Object: object})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s event for %s (%d events)", reason, object, len(evs))
}

// runningID checks that node's only container of the snapshot runs the
// image of ID id.
func runningID(s snapshot, node, id string) error {
	list := s[node]
	if len(list) != 1 {
		return fmt.Errorf("node %s: %d containers, want 1: %s", node, len(list), s.describe(node))
	}
	if c := list[0]; c.State != container.StateRunning || c.ImageID != id {
		return fmt.Errorf("node %s: %.12s runs image %s (%s), want %s", node, c.ID, c.ImageID, c.State, id)
	}
	return nil
}
