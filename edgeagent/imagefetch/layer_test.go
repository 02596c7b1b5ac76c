package imagefetch_test

import (
	"bytes"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent/imagefetch"
)

// TestFetchLayerResumesAndPins: a layer fetched alone (the agent's own
// binary) resumes across a dropped link, needs no loader, and must be the
// digest the caller pins.
func TestFetchLayerResumesAndPins(t *testing.T) {
	binary := bytes.Repeat([]byte("\x7fELF agent"), 20000)
	reg := newRegistry(t, []byte(`{"rootfs":{}}`), binary)
	reg.cutAfter = len(binary) / 2
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	f, err := imagefetch.New(imagefetch.Options{URL: srv.URL, Node: "n1", Token: "tok", Dir: t.TempDir(), RetryDelay: time.Millisecond})
	require.NoError(t, err)

	path, err := f.FetchLayer(t.Context(), "app:v1", digest(binary))
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, binary, got)
	assert.Equal(t, int64(len(binary)), f.LayerProgress(digest(binary)))
	reg.mu.Lock()
	served, ranges := reg.served, reg.ranges
	reg.mu.Unlock()
	assert.Less(t, served, len(binary)+len(binary)/2+4096, "the second request resumed rather than started over")
	assert.Contains(t, ranges, "bytes="+itoa(reg.cutAfter)+"-")

	_, err = f.FetchLayer(t.Context(), "app:v1", digest([]byte("another binary")))
	assert.ErrorIs(t, err, imagefetch.ErrDigest)
	assert.ErrorContains(t, err, "its manifest lists no layer")

	require.NoError(t, f.RemoveLayer(digest(binary)))
	assert.Zero(t, f.LayerProgress(digest(binary)))
	assert.ErrorContains(t, f.FetchImage(t.Context(), "app:v1"), "loads no images (no loader)")
}
