package imagestore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/imagestore"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// inUse is a settable set of names in use.
type inUse struct {
	mu    sync.Mutex
	names map[string]bool
}

func (u *inUse) Set(names ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.names = map[string]bool{}
	for _, n := range names {
		u.names[n] = true
	}
}

func (u *inUse) Get() map[string]bool { u.mu.Lock(); defer u.mu.Unlock(); return u.names }

func open(t *testing.T, dir string, quota int64, c *clock, u *inUse) *imagestore.Store {
	t.Helper()
	s, err := imagestore.Open(imagestore.Options{Dir: dir, Quota: quota, MaxUpload: 1 << 20, GCGrace: time.Minute, Clock: c.Now, InUse: u.Get})
	require.NoError(t, err)
	return s
}

func newStore(t *testing.T, quota int64) (*imagestore.Store, string, *clock, *inUse) {
	t.Helper()
	dir := t.TempDir()
	c, u := &clock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, &inUse{}
	return open(t, dir, quota, c, u), dir, c, u
}

// blobDigest reads a blob back and returns the sha256 of what it holds.
func blobDigest(t *testing.T, s *imagestore.Store, d string) string {
	t.Helper()
	f, err := s.OpenBlob(d)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// tmpEmpty asserts that no upload is left behind.
func tmpEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	assert.Empty(t, entries, "tmp/ after the push")
}

func TestPushDockerSave(t *testing.T) {
	s, dir, _, _ := newStore(t, 0)
	base := layerTar(t, "base", []byte("base layer"))
	app := testImage{tags: []string{"app:v1", "registry.example:5000/team/app:v1"}, layers: [][]byte{base, layerTar(t, "app", []byte("app"))}}
	other := testImage{tags: []string{"other"}, layers: [][]byte{base}}
	got, err := s.Push(t.Context(), bytes.NewReader(dockerSave(t, app, other)), imagestore.PushOptions{})
	require.NoError(t, err)
	var names []string
	for _, im := range got {
		names = append(names, im.Name)
	}
	assert.ElementsMatch(t, []string{"docker.io/library/app:v1", "registry.example:5000/team/app:v1", "docker.io/library/other:latest"}, names)
	im, ok := s.Image("docker.io/library/app:v1")
	require.True(t, ok)
	require.Len(t, im.Layers, 2)
	for _, d := range im.Blobs() {
		assert.Equal(t, d, blobDigest(t, s, d), "blob %s holds what its digest names", d)
	}
	assert.Equal(t, "sha256:"+sha(base), im.Layers[0].Digest)
	manifest, digest, err := s.Manifest(im.Name)
	require.NoError(t, err)
	assert.Equal(t, im.Digest, digest)
	assert.Contains(t, string(manifest), im.Config.Digest)
	tmpEmpty(t, dir)

	// Layers are stored once: the shared base and the app layer, three
	// configs... two configs, two manifests (the app's two names share one).
	used, _ := s.Usage()
	var want int64
	for _, d := range uniq(append(im.Blobs(), mustImage(t, s, "other").Blobs()...)) {
		f, err := s.OpenBlob(d)
		require.NoError(t, err)
		info, err := f.Stat()
		require.NoError(t, err)
		f.Close()
		want += info.Size()
	}
	assert.Equal(t, want, used)
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func mustImage(t *testing.T, s *imagestore.Store, name string) imagestore.Image {
	t.Helper()
	n, err := imagestore.Normalize(name)
	require.NoError(t, err)
	im, ok := s.Image(n)
	require.True(t, ok, "image %s stored", n)
	return im
}

func TestPushOCILayout(t *testing.T) {
	s, _, _, _ := newStore(t, 0)
	layers := [][]byte{layerTar(t, "f", []byte("oci"))}
	_, err := s.Push(t.Context(), bytes.NewReader(ociLayout(t, "", layers)), imagestore.PushOptions{})
	require.ErrorIs(t, err, imagestore.ErrInvalid, "an unnamed OCI image needs a name")
	got, err := s.Push(t.Context(), bytes.NewReader(ociLayout(t, "", layers)), imagestore.PushOptions{Name: "oci/app:1"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "docker.io/oci/app:1", got[0].Name)
	got, err = s.Push(t.Context(), bytes.NewReader(ociLayout(t, "example.com/named:2", layers)), imagestore.PushOptions{})
	require.NoError(t, err)
	assert.Equal(t, "example.com/named:2", got[0].Name)
	assert.Equal(t, "sha256:"+sha(layers[0]), got[0].Layers[0].Digest)
}

// TestPushRefusesBadArchives: nothing of a refused upload is stored.
func TestPushRefusesBadArchives(t *testing.T) {
	good := layerTar(t, "f", []byte("content"))
	cfg := configOf(t, [][]byte{good})
	tampered := layerTar(t, "f", []byte("CONTENT"))
	cases := []struct {
		name    string
		archive []byte
		want    error
		msg     string
	}{
		{"layer not matching its diff ID", writeTar(t, []archiveFile{
			{name: sha(cfg) + ".json", data: cfg}, {name: "l/layer.tar", data: tampered},
			{name: "manifest.json", data: []byte(`[{"Config":"` + sha(cfg) + `.json","RepoTags":["x:1"],"Layers":["l/layer.tar"]}]`)}}),
			imagestore.ErrDigest, "layer 0 (l/layer.tar)"},
		{"config not matching its name", writeTar(t, []archiveFile{
			{name: sha(cfg) + ".json", data: append(cfg, ' ')}, {name: "l/layer.tar", data: good},
			{name: "manifest.json", data: []byte(`[{"Config":"` + sha(cfg) + `.json","RepoTags":["x:1"],"Layers":["l/layer.tar"]}]`)}}),
			imagestore.ErrDigest, sha(cfg) + ".json"},
		{"missing layer", writeTar(t, []archiveFile{
			{name: sha(cfg) + ".json", data: cfg},
			{name: "manifest.json", data: []byte(`[{"Config":"` + sha(cfg) + `.json","RepoTags":["x:1"],"Layers":["l/layer.tar"]}]`)}}),
			imagestore.ErrInvalid, "no file l/layer.tar"},
		{"not an image archive", writeTar(t, []archiveFile{{name: "hello", data: []byte("x")}}), imagestore.ErrInvalid, "neither manifest.json"},
		{"not a tar", []byte("definitely not a tar archive, but long enough to be read as a header block by the tar reader"), imagestore.ErrInvalid, "reading the archive"},
		{"bad name", dockerSave(t, testImage{tags: []string{"UPPER:case"}, layers: [][]byte{good}}), imagestore.ErrInvalid, "UPPER"},
		{"too large", dockerSave(t, testImage{tags: []string{"big:1"}, layers: [][]byte{layerTar(t, "big", bytes.Repeat([]byte("x"), 2<<20))}}), imagestore.ErrTooLarge, "more than 1048576 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, dir, _, _ := newStore(t, 0)
			_, err := s.Push(t.Context(), bytes.NewReader(tc.archive), imagestore.PushOptions{})
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Empty(t, s.Images())
			used, _ := s.Usage()
			assert.Zero(t, used)
			tmpEmpty(t, dir)
		})
	}
}

func TestPushCancelled(t *testing.T) {
	s, dir, _, _ := newStore(t, 0)
	archive := dockerSave(t, testImage{tags: []string{"a:1"}, layers: [][]byte{layerTar(t, "f", []byte("x"))}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Push(ctx, bytes.NewReader(archive), imagestore.PushOptions{})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, s.Images())
	tmpEmpty(t, dir)
}

func TestReopen(t *testing.T) {
	s, dir, c, u := newStore(t, 0)
	archive := dockerSave(t, testImage{tags: []string{"a:1"}, layers: [][]byte{layerTar(t, "f", []byte("x"))}})
	_, err := s.Push(t.Context(), bytes.NewReader(archive), imagestore.PushOptions{})
	require.NoError(t, err)
	before := s.Images()

	// What a crash can leave: an unfinished upload, an orphan blob (renamed
	// before its image file was written), a temporary image file.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tmp", "upload-1"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tmp", "upload-1", "0"), []byte("half"), 0o600))
	orphan := []byte("orphan")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blobs", "sha256", sha(orphan)), orphan, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "images", ".tmp-1"), []byte("{"), 0o600))

	s2 := open(t, dir, 0, c, u)
	assert.Equal(t, before, s2.Images())
	_, err = s2.OpenBlob("sha256:" + sha(orphan))
	require.ErrorIs(t, err, imagestore.ErrNotFound)
	tmpEmpty(t, dir)
	_, err = os.Stat(filepath.Join(dir, "images", ".tmp-1"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	// An image whose layer is gone (deleted by hand) is dropped, the rest kept.
	im := before[0]
	require.NoError(t, os.Remove(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(im.Layers[0].Digest, "sha256:"))))
	s3 := open(t, dir, 0, c, u)
	assert.Empty(t, s3.Images())
	used, _ := s3.Usage()
	assert.Zero(t, used, "the dropped image's other blobs are swept")
}

func TestRemove(t *testing.T) {
	s, _, _, u := newStore(t, 0)
	base := layerTar(t, "base", []byte("base"))
	_, err := s.Push(t.Context(), bytes.NewReader(dockerSave(t,
		testImage{tags: []string{"a:1"}, layers: [][]byte{base}},
		testImage{tags: []string{"b:1"}, layers: [][]byte{base, layerTar(t, "b", []byte("b"))}})), imagestore.PushOptions{})
	require.NoError(t, err)
	u.Set("docker.io/library/b:1")

	_, err = s.Remove("b:1", false)
	require.ErrorIs(t, err, imagestore.ErrInUse)
	assert.Contains(t, err.Error(), "docker.io/library/b:1")
	_, err = s.Remove("nope:1", false)
	require.ErrorIs(t, err, imagestore.ErrNotFound)

	a := mustImage(t, s, "a:1")
	b := mustImage(t, s, "b:1")
	_, err = s.Remove("b:1", true)
	require.NoError(t, err)
	_, ok := s.Image(b.Name)
	assert.False(t, ok)
	for _, d := range a.Blobs() {
		assert.Equal(t, d, blobDigest(t, s, d), "a's blob %s is kept", d)
	}
	_, err = s.OpenBlob(b.Layers[1].Digest)
	require.ErrorIs(t, err, imagestore.ErrNotFound, "b's own layer is removed")
}

// TestQuota: a push that does not fit collects unreferenced images past
// the grace period, and is refused naming the image if that is not enough.
func TestQuota(t *testing.T) {
	layer := func(s string) [][]byte { return [][]byte{layerTar(t, s, bytes.Repeat([]byte(s), 3000))} }
	one := dockerSave(t, testImage{tags: []string{"one:1"}, layers: layer("1")})
	probe, _, _, _ := newStore(t, 0)
	_, err := probe.Push(t.Context(), bytes.NewReader(one), imagestore.PushOptions{})
	require.NoError(t, err)
	size := mustImage(t, probe, "one:1").Size
	quota := size + size/2 // room for one image, not two

	s, _, c, u := newStore(t, quota)
	push := func(name, content string) error {
		_, err := s.Push(t.Context(), bytes.NewReader(dockerSave(t, testImage{tags: []string{name}, layers: layer(content)})), imagestore.PushOptions{})
		return err
	}
	require.NoError(t, push("one:1", "1"))
	err = push("two:1", "2")
	require.ErrorIs(t, err, imagestore.ErrQuota, "one:1 is within its grace period")
	assert.Contains(t, err.Error(), "docker.io/library/two:1")

	c.Add(2 * time.Minute)
	u.Set("docker.io/library/one:1")
	require.ErrorIs(t, push("two:1", "2"), imagestore.ErrQuota, "one:1 is in use")

	u.Set()
	require.NoError(t, push("two:1", "2"), "one:1 is collected to make room")
	_, ok := s.Image("docker.io/library/one:1")
	assert.False(t, ok)
	used, q := s.Usage()
	assert.LessOrEqual(t, used, q)
}

func TestGC(t *testing.T) {
	s, _, c, u := newStore(t, 0)
	push := func(name string) {
		_, err := s.Push(t.Context(), bytes.NewReader(dockerSave(t, testImage{tags: []string{name}, layers: [][]byte{layerTar(t, name, []byte(name))}})), imagestore.PushOptions{})
		require.NoError(t, err)
	}
	push("old:1")
	push("used:1")
	c.Add(2 * time.Minute)
	push("new:1")
	u.Set("docker.io/library/used:1")
	removed, freed, err := s.GC()
	require.NoError(t, err)
	assert.Equal(t, []string{"docker.io/library/old:1"}, removed)
	assert.Positive(t, freed)
	var names []string
	for _, im := range s.Images() {
		names = append(names, im.Name)
	}
	assert.Equal(t, []string{"docker.io/library/new:1", "docker.io/library/used:1"}, names)
}

// TestConcurrentPushes: uploads run in parallel; the store ends with all.
func TestConcurrentPushes(t *testing.T) {
	s, dir, _, _ := newStore(t, 0)
	shared := layerTar(t, "shared", []byte("shared"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			name := "app:" + string(rune('a'+i))
			_, err := s.Push(context.Background(), bytes.NewReader(dockerSave(t, testImage{tags: []string{name}, layers: [][]byte{shared, layerTar(t, name, []byte(name))}})), imagestore.PushOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Len(t, s.Images(), 8)
	tmpEmpty(t, dir)
}

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"app", "docker.io/library/app:latest"},
		{"app:v1", "docker.io/library/app:v1"},
		{"team/app:v1", "docker.io/team/app:v1"},
		{"localhost:5000/app:v1", "localhost:5000/app:v1"},
		{"app@sha256:" + strings.Repeat("a", 64), "docker.io/library/app@sha256:" + strings.Repeat("a", 64)},
	}
	for _, tc := range cases {
		got, err := imagestore.Normalize(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "UPPER", "a b", "app:"} {
		_, err := imagestore.Normalize(bad)
		assert.True(t, errors.Is(err, imagestore.ErrInvalid), "%q: %v", bad, err)
	}
}

func TestValidDigest(t *testing.T) {
	require.NoError(t, imagestore.ValidDigest("sha256:"+strings.Repeat("0", 64)))
	for _, bad := range []string{"", "sha256:", "sha512:" + strings.Repeat("0", 64), "sha256:" + strings.Repeat("A", 64), "sha256:../../../etc/passwd" + strings.Repeat("0", 38), "sha256:" + strings.Repeat("g", 64)} {
		assert.ErrorIs(t, imagestore.ValidDigest(bad), imagestore.ErrInvalid, bad)
	}
}
