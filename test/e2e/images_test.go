package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
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

// noRegistry is a registry address nothing listens on: a pull from it
// fails at once, as on a site without a registry.
const noRegistry = "127.0.0.1:1"

// TestImagesWithoutRegistry pushes locally built images to the
// controller, removes them from the engine, and runs daemonsets that use
// them: one whose registry is unreachable (apps/v1: the agent falls back
// to the controller) through a link cut halfway, which resumes; one
// (imageSource: controller) whose layer is corrupted on the controller's
// disk, which is refused and never runs.
func TestImagesWithoutRegistry(t *testing.T) {
	cli := testimage.RequireDocker(t)
	base := testimage.Build(t)
	f := startFleet(t, cli, 0)
	proxy := newCuttingProxy(t, strings.TrimPrefix(f.apiURL, "http://"))
	node := testimage.Node(t, cli)
	fetchDir := t.TempDir()
	f.startAgent(t, node, func(rt *docker.Runtime) edgeagent.ImageFetcher {
		fetcher, err := imagefetch.New(imagefetch.Options{
			URL: "http://" + proxy.addr(), Node: node, Token: credential.NodeToken(f.secret, node),
			Dir: fetchDir, Loader: rt, Log: testLogger(node + "/images"),
		})
		require.NoError(t, err)
		return fetcher
	})
	f.nodes = append(f.nodes, node)
	f.waitNodes(t)

	t.Run("ResumesAfterCut", func(t *testing.T) { testResumedFetch(t, f, cli, base, proxy) })
	t.Run("CorruptLayerRefused", func(t *testing.T) { testCorruptLayer(t, f, cli, base) })
}

func testResumedFetch(t *testing.T, f *fleet, cli *client.Client, base string, proxy *cuttingProxy) {
	image := uniqueImage(t, cli, base, "resume")
	pushed := pushFromEngine(t, f, cli, image)
	removeImage(t, cli, image)

	proxy.cutAt(pushed.Size / 2)
	const key = "e2e/fetched"
	f.apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fetched, namespace: e2e}
spec:
  selector: {matchLabels: {app: fetched}}
  template:
    metadata: {labels: {app: fetched}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: "%s", imagePullPolicy: IfNotPresent, args: [sleep]}
`, image))
	checkfor.Eventually(t, wait, poll, func() error { return f.containersOf(t, key).running(f.nodes[0], image) })

	require.True(t, proxy.didCut(), "the link was cut during the download")
	sent := proxy.sent()
	t.Logf("image %s: %d bytes; the controller sent %d bytes through the proxy (%.2fx), the link cut after %d",
		image, pushed.Size, sent, float64(sent)/float64(pushed.Size), pushed.Size/2)
	assert.LessOrEqual(t, float64(sent), 1.2*float64(pushed.Size), "the download resumed rather than restarted")
	assert.GreaterOrEqual(t, sent, pushed.Size, "every blob crossed the proxy")

	// Another node, with a valid credential of its own, may not fetch an
	// image its desired state does not reference; a wrong token gets in
	// nowhere.
	for _, c := range []struct {
		node, token string
		want        int
	}{
		{"other-node", credential.NodeToken(f.secret, "other-node"), http.StatusForbidden},
		{f.nodes[0], "wrong", http.StatusUnauthorized},
		{f.nodes[0], credential.NodeToken(f.secret, f.nodes[0]), http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.apiURL+api.NodeImagesPrefix+"manifests?image="+url.QueryEscape(image), nil)
		require.NoError(t, err)
		req.SetBasicAuth(c.node, c.token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, c.want, resp.StatusCode, "node %s fetching %s", c.node, image)
	}
}

func testCorruptLayer(t *testing.T, f *fleet, cli *client.Client, base string) {
	image := uniqueImage(t, cli, base, "corrupt")
	pushed := pushFromEngine(t, f, cli, image)
	removeImage(t, cli, image)
	list, err := f.api.ListImages(t.Context())
	require.NoError(t, err)
	var layer string
	for _, im := range list.Images {
		if im.Name == pushed.Name {
			layer = payloadLayer(t, f, im)
		}
	}
	require.NotEmpty(t, layer)
	corrupt(t, filepath.Join(f.dataDir, "images", "blobs", "sha256", strings.TrimPrefix(layer, "sha256:")))

	const key = "e2e/corrupt"
	f.apply(t, fmt.Sprintf(`apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: corrupt, namespace: e2e}
spec:
  selector: {matchLabels: {app: corrupt}}
  template:
    metadata: {labels: {app: corrupt}}
    spec:
      imageSource: controller
      terminationGracePeriodSeconds: 3
      containers:
      - {name: main, image: "%s", args: [sleep]}
`, image))
	checkfor.Eventually(t, wait, poll, func() error {
		insts, err := f.api.ListInstances(t.Context())
		if err != nil {
			return err
		}
		for _, in := range insts {
			if in.DaemonSet == key && strings.Contains(in.Message, "digest mismatch") {
				return nil
			}
		}
		return fmt.Errorf("no instance of %s reports the digest mismatch yet: %+v", key, insts)
	})
	snap := f.containersOf(t, key)
	assert.Empty(t, snap[f.nodes[0]], "nothing of the corrupted image runs")
	_, err = cli.ImageInspect(t.Context(), image)
	assert.True(t, cerrdefs.IsNotFound(err), "the corrupted image was not loaded: %v", err)
}

// payloadLayer returns the digest of the image's own layer (the one
// holding its random payload, not the test image's), found on the
// controller's disk by the payload's marker.
func payloadLayer(t *testing.T, f *fleet, im api.Image) string {
	t.Helper()
	dir := filepath.Join(f.dataDir, "images", "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var best string
	var bestSize int64
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		if bytes.Contains(raw, []byte(payloadMarker(im.Name))) && info.Size() > bestSize {
			best, bestSize = "sha256:"+e.Name(), info.Size()
		}
	}
	return best
}

// payloadMarker is written at the start of an image's random payload, so
// that its layer can be found on the controller's disk.
func payloadMarker(image string) string {
	return "edgeset-e2e-payload:" + strings.TrimPrefix(image, "docker.io/")
}

// corrupt flips one byte in the middle of a file, keeping its size.
func corrupt(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0xff
	require.NoError(t, os.WriteFile(path, raw, 0o600))
}

// uniqueImage commits the test image plus a 1 MiB random file as an image
// of its own under the unreachable registry, removed at cleanup.
func uniqueImage(t *testing.T, cli *client.Client, base, name string) string {
	t.Helper()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	image := noRegistry + "/edgeset-e2e-" + name + ":" + hex.EncodeToString(suffix[:])
	ctx := t.Context()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: base, Labels: map[string]string{testimage.LabelTest: "images"}},
	})
	require.NoError(t, err)
	defer func() {
		_, _ = cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	}()
	payload := make([]byte, 1<<20)
	_, _ = rand.Read(payload)
	copy(payload, payloadMarker(image))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "payload", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(payload))}))
	_, err = tw.Write(payload)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	_, err = cli.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{DestinationPath: "/tmp", Content: &buf})
	require.NoError(t, err)
	_, err = cli.ContainerCommit(ctx, created.ID, client.ContainerCommitOptions{Reference: image})
	require.NoError(t, err)
	t.Cleanup(func() { removeImage(t, cli, image) })
	return image
}

// pushFromEngine saves image from the engine and pushes it, as
// edgesetctl image push IMAGE does.
func pushFromEngine(t *testing.T, f *fleet, cli *client.Client, image string) api.Image {
	t.Helper()
	saved, err := cli.ImageSave(t.Context(), []string{image})
	require.NoError(t, err)
	defer saved.Close()
	images, err := f.api.PushImage(t.Context(), saved, image)
	require.NoError(t, err)
	require.Len(t, images, 1)
	return images[0]
}

// removeImage removes image from the engine; an absent one is fine.
func removeImage(t *testing.T, cli *client.Client, image string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if _, err := cli.ImageRemove(ctx, image, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		t.Errorf("remove image %s: %v", image, err)
	}
}

// cuttingProxy forwards TCP connections to the controller's API, counts
// the bytes the controller sends, and once a threshold has passed closes
// every open connection, once: a link that drops mid-download.
type cuttingProxy struct {
	ln       net.Listener
	upstream string
	count    atomic.Int64
	limit    atomic.Int64 // cut once count passes it; 0: never
	cut      atomic.Bool
	mu       sync.Mutex // guards conns
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

func newCuttingProxy(t *testing.T, upstream string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cuttingProxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *cuttingProxy) addr() string { return p.ln.Addr().String() }

// cutAt resets the counter and arms the cut after n bytes.
func (p *cuttingProxy) cutAt(n int64) {
	p.count.Store(0)
	p.cut.Store(false)
	p.limit.Store(n)
}

func (p *cuttingProxy) didCut() bool { return p.cut.Load() }
func (p *cuttingProxy) sent() int64  { return p.count.Load() }

func (p *cuttingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(c, up)
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { defer p.wg.Done(); p.down(c, up); _ = c.Close() }()
	}
}

func (p *cuttingProxy) track(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		p.conns[c] = true
	}
}

// down copies what the controller sends to the client, counting it, and
// cuts every connection once the count passes the limit.
func (p *cuttingProxy) down(client, up net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
			total := p.count.Add(int64(n))
			if l := p.limit.Load(); l > 0 && total >= l && p.cut.CompareAndSwap(false, true) {
				p.closeAll()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = client.Close()
			}
			return
		}
	}
}

func (p *cuttingProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}
