package imagefetch_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/imagefetch"
)

var _ edgeagent.ProgressFetcher = (*imagefetch.Fetcher)(nil)

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// registry is a controller's node endpoints serving one image: the
// first cutAfter bytes of each blob's first download are followed by a
// dropped connection when cutAfter > 0.
type registry struct {
	t        *testing.T
	manifest []byte
	blobs    map[string][]byte
	tamper   bool // serve every blob with its last byte flipped
	stall    bool // stall instead of dropping the connection at the cut
	lie      bool // serve the manifest whatever digest is asked for

	mu       sync.Mutex // guards cut, served, ranges
	cutAfter int
	cut      map[string]bool
	served   int      // blob bytes written
	ranges   []string // Range headers received
}

func newRegistry(t *testing.T, config []byte, layers ...[]byte) *registry {
	r := &registry{t: t, blobs: map[string][]byte{digest(config): config}, cut: map[string]bool{}}
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int    `json:"size"`
	}
	m := struct {
		SchemaVersion int    `json:"schemaVersion"`
		Config        desc   `json:"config"`
		Layers        []desc `json:"layers"`
	}{SchemaVersion: 2, Config: desc{"application/vnd.oci.image.config.v1+json", digest(config), len(config)}}
	for _, l := range layers {
		r.blobs[digest(l)] = l
		m.Layers = append(m.Layers, desc{"application/vnd.oci.image.layer.v1.tar", digest(l), len(l)})
	}
	var err error
	r.manifest, err = json.Marshal(m)
	require.NoError(t, err)
	return r
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if u, p, ok := req.BasicAuth(); !ok || u != "n1" || p != "tok" {
		http.Error(w, `{"message":"missing or wrong node credential"}`, http.StatusUnauthorized)
		return
	}
	if req.URL.Path == "/api/v1/node/manifests" {
		image, want := req.URL.Query().Get("image"), req.URL.Query().Get("digest")
		if _, d, ok := strings.Cut(image, "@"); ok && want == "" {
			want = d
		}
		if image != "app:v1" && want == "" {
			http.Error(w, `{"message":"image not referenced"}`, http.StatusForbidden)
			return
		}
		if want != "" && want != digest(r.manifest) && !r.lie {
			http.Error(w, `{"message":"manifest not in the image store"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Docker-Content-Digest", digest(r.manifest))
		_, _ = w.Write(r.manifest)
		return
	}
	d := strings.TrimPrefix(req.URL.Path, "/api/v1/node/blobs/")
	blob, ok := r.blobs[d]
	if !ok {
		http.NotFound(w, req)
		return
	}
	if r.tamper {
		blob = bytes.Clone(blob)
		blob[len(blob)-1] ^= 0xff
	}
	r.mu.Lock()
	r.ranges = append(r.ranges, req.Header.Get("Range"))
	cut := r.cutAfter > 0 && !r.cut[d] && len(blob) > r.cutAfter
	r.cut[d] = true
	r.mu.Unlock()
	w.Header().Set("ETag", `"`+d+`"`)
	cw := &countingWriter{ResponseWriter: w, r: r}
	if !cut {
		http.ServeContent(cw, req, "", time.Time{}, bytes.NewReader(blob))
		return
	}
	w.Header().Set("Content-Length", itoa(len(blob)))
	w.WriteHeader(http.StatusOK)
	_, _ = cw.Write(blob[:r.cutAfter])
	if r.stall {
		<-req.Context().Done() // a link that dies silently: no byte, no reset
		return
	}
	panic(http.ErrAbortHandler) // drop the connection mid-body
}

type countingWriter struct {
	http.ResponseWriter
	r *registry
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.r.mu.Lock()
	c.r.served += n
	c.r.mu.Unlock()
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	return n, err
}

func itoa(n int) string { return jsonNumber(n) }

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }

// loader records the archives it is given.
type loader struct {
	err   error
	files map[string][]byte
}

func (l *loader) LoadImage(_ context.Context, archive io.Reader) error {
	l.files = map[string][]byte{}
	tr := tar.NewReader(archive)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return l.err
		}
		if err != nil {
			return err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			l.files[hdr.Name] = b
		}
	}
}

func newFetcher(t *testing.T, url, dir string, l imagefetch.Loader) *imagefetch.Fetcher {
	t.Helper()
	f, err := imagefetch.New(imagefetch.Options{URL: url, Node: "n1", Token: "tok", Dir: dir, Loader: l, RetryDelay: time.Millisecond})
	require.NoError(t, err)
	return f
}

func TestFetchLoadsDockerArchive(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("layer"), 1000)
	reg := newRegistry(t, config, layer)
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	l := &loader{}
	dir := t.TempDir()
	require.NoError(t, newFetcher(t, srv.URL, dir, l).FetchImage(t.Context(), "app:v1"))

	var m []struct {
		Config           string
		RepoTags, Layers []string
	}
	require.NoError(t, json.Unmarshal(l.files["manifest.json"], &m))
	require.Len(t, m, 1)
	assert.Equal(t, []string{"app:v1"}, m[0].RepoTags)
	assert.Equal(t, config, l.files[m[0].Config])
	require.Len(t, m[0].Layers, 1)
	assert.Equal(t, layer, l.files[m[0].Layers[0]])
	entries, err := os.ReadDir(filepath.Join(dir, "blobs"))
	require.NoError(t, err)
	assert.Empty(t, entries, "blobs are removed once loaded")
}

// TestFetchResumes: a link dropped halfway through a layer resumes with
// a Range request; the bytes served stay near the image's size.
func TestFetchResumes(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("0123456789"), 10000)
	reg := newRegistry(t, config, layer)
	reg.cutAfter = len(layer) / 2
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	l := &loader{}
	require.NoError(t, newFetcher(t, srv.URL, t.TempDir(), l).FetchImage(t.Context(), "app:v1"))
	srv.Close() // waits for the handlers: their counts are final
	assert.Contains(t, reg.ranges, "bytes="+jsonNumber(len(layer)/2)+"-", "the second request resumes at the cut")
	assert.LessOrEqual(t, reg.served, len(layer)+len(config)+len(layer)/50, "no byte is sent twice")
	assert.Equal(t, layer, loadedLayer(t, l))
}

// TestFetchResumesAfterRestart: a fetch that gives up leaves the partial
// blob; a new Fetcher on the same directory (an agent restart) resumes it.
func TestFetchResumesAfterRestart(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("abcdefghij"), 10000)
	reg := newRegistry(t, config, layer)
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	// A download that stopped halfway: its first half on disk.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "blobs"), 0o700))
	partial := filepath.Join(dir, "blobs", strings.TrimPrefix(digest(layer), "sha256:")+".partial")
	require.NoError(t, os.WriteFile(partial, layer[:len(layer)/2], 0o600))

	l := &loader{}
	require.NoError(t, newFetcher(t, srv.URL, dir, l).FetchImage(t.Context(), "app:v1"))
	assert.Equal(t, layer, loadedLayer(t, l))
	srv.Close() // waits for the handlers: their counts are final
	assert.LessOrEqual(t, reg.served, len(layer)/2+len(config)+100, "only the missing half is sent")
}

func loadedLayer(t *testing.T, l *loader) []byte {
	t.Helper()
	var m []struct{ Layers []string }
	require.NoError(t, json.Unmarshal(l.files["manifest.json"], &m))
	return l.files[m[0].Layers[0]]
}

// TestFetchRefusesTampered: a blob not matching its digest is discarded
// and nothing is loaded.
func TestFetchRefusesTampered(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("x"), 5000)
	reg := newRegistry(t, config, layer)
	reg.tamper = true
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	l := &loader{}
	dir := t.TempDir()
	err := newFetcher(t, srv.URL, dir, l).FetchImage(t.Context(), "app:v1")
	require.ErrorIs(t, err, imagefetch.ErrDigest)
	assert.Contains(t, err.Error(), "app:v1")
	assert.Nil(t, l.files, "nothing was loaded")
	entries, err := os.ReadDir(filepath.Join(dir, "blobs"))
	require.NoError(t, err)
	assert.Empty(t, entries, "the bad download is discarded")
}

func TestFetchRefused(t *testing.T) {
	reg := newRegistry(t, []byte(`{}`))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	err := newFetcher(t, srv.URL, t.TempDir(), &loader{}).FetchImage(t.Context(), "other:v1")
	require.ErrorIs(t, err, imagefetch.ErrRefused)
	assert.Contains(t, err.Error(), "image not referenced")
	assert.Contains(t, err.Error(), "other:v1")

	bad, err := imagefetch.New(imagefetch.Options{URL: srv.URL, Node: "n1", Token: "wrong", Dir: t.TempDir(), Loader: &loader{}})
	require.NoError(t, err)
	err = bad.FetchImage(t.Context(), "app:v1")
	require.ErrorIs(t, err, imagefetch.ErrRefused)
	assert.Contains(t, err.Error(), "401")
}

// TestFetchAbandonsStalledLink: a download that receives nothing for the
// idle timeout is abandoned and resumed by the next attempt.
func TestFetchAbandonsStalledLink(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("stall"), 20000)
	reg := newRegistry(t, config, layer)
	reg.cutAfter, reg.stall = len(layer)/2, true
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	l := &loader{}
	f, err := imagefetch.New(imagefetch.Options{URL: srv.URL, Node: "n1", Token: "tok", Dir: t.TempDir(), Loader: l,
		RetryDelay: time.Millisecond, IdleTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.FetchImage(t.Context(), "app:v1"))
	assert.Equal(t, layer, loadedLayer(t, l))
	srv.Close()
	assert.Contains(t, reg.ranges, "bytes="+jsonNumber(len(layer)/2)+"-", "the next attempt resumes at the stall")
}

// TestFetchProgress: a fetch through a link dropped halfway reports the
// bytes present of the image's total, never going back, the resumed part
// counted from where the drop left it, and ends at the total.
func TestFetchProgress(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("0123456789"), 10000)
	reg := newRegistry(t, config, layer)
	reg.cutAfter = len(layer) / 2
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	total := int64(len(config) + len(layer))
	var seen []int64
	err := newFetcher(t, srv.URL, t.TempDir(), &loader{}).FetchImageProgress(t.Context(), "app:v1", func(done, tot int64) {
		assert.Equal(t, total, tot)
		seen = append(seen, done)
	})
	require.NoError(t, err)
	require.NotEmpty(t, seen)
	assert.Equal(t, int64(0), seen[0])
	assert.Equal(t, total, seen[len(seen)-1])
	for i := 1; i < len(seen); i++ {
		require.GreaterOrEqual(t, seen[i], seen[i-1], "progress went back at %d: %v", i, seen)
	}
}

var _ edgeagent.DigestFetcher = (*imagefetch.Fetcher)(nil)

// TestFetchByDigest: a pinned image is fetched by its manifest digest and
// loaded under the template's reference (untagged for a reference by
// digest alone); a controller that serves another manifest than the
// pinned one is refused, whatever digest it claims.
func TestFetchByDigest(t *testing.T) {
	config, layer := []byte(`{"rootfs":{}}`), bytes.Repeat([]byte("pinned"), 1000)
	reg := newRegistry(t, config, layer)
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	pinned := digest(reg.manifest)
	tags := func(l *loader) []string {
		var m []struct{ RepoTags []string }
		require.NoError(t, json.Unmarshal(l.files["manifest.json"], &m))
		return m[0].RepoTags
	}

	l := &loader{}
	require.NoError(t, newFetcher(t, srv.URL, t.TempDir(), l).FetchImageDigest(t.Context(), "app:v1", pinned, nil))
	assert.Equal(t, []string{"app:v1"}, tags(l))
	assert.Equal(t, layer, loadedLayer(t, l))

	for ref, want := range map[string][]string{"app@" + pinned: nil, "registry.example:5000/app:v2@" + pinned: {"registry.example:5000/app:v2"}} {
		l = &loader{}
		require.NoError(t, newFetcher(t, srv.URL, t.TempDir(), l).FetchImage(t.Context(), ref), ref)
		assert.Equal(t, want, tags(l), ref)
	}

	other := "sha256:" + strings.Repeat("0", 64)
	l = &loader{}
	err := newFetcher(t, srv.URL, t.TempDir(), l).FetchImageDigest(t.Context(), "app:v1", other, nil)
	require.ErrorIs(t, err, imagefetch.ErrRefused, "the controller does not hold that digest")

	reg.lie = true
	err = newFetcher(t, srv.URL, t.TempDir(), l).FetchImageDigest(t.Context(), "app:v1", other, nil)
	require.ErrorIs(t, err, imagefetch.ErrDigest)
	assert.Contains(t, err.Error(), "the pinned digest "+other)
	assert.Nil(t, l.files, "nothing was loaded")

	err = newFetcher(t, srv.URL, t.TempDir(), l).FetchImageDigest(t.Context(), "app:v1", "sha256:12", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `digest "sha256:12"`)
}
