package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imageFake is a Backend with an image store of one blob, which only node
// "n1" (token "t1") may fetch; download slots are counted.
type imageFake struct {
	fakeBackend
	blob     string // path of the blob file
	pushed   string // body of the last push
	digest   string // digest asked for by the last manifest request
	slots    int
	released int
}

const fakeDigest = "sha256:" + "ab0000000000000000000000000000000000000000000000000000000000000a"

func (f *imageFake) PushImages(_ context.Context, r io.Reader, name string) ([]Image, error) {
	b, err := io.ReadAll(r)
	f.pushed = string(b)
	return []Image{{Name: name}}, err
}
func (f *imageFake) ListImages(context.Context) (ImageList, error) {
	return ImageList{Images: []Image{{Name: "docker.io/library/app:v1"}}, Used: 10, Quota: 100}, nil
}
func (f *imageFake) RemoveImage(_ context.Context, name string, force bool) (Image, error) {
	if !force {
		return Image{}, fmt.Errorf("%w: image %s in use", ErrConflict, name)
	}
	return Image{Name: name}, nil
}
func (f *imageFake) AuthenticateNode(node string, token []byte) bool {
	return (node == "n1" && string(token) == "t1") || (node == "n2" && string(token) == "t2")
}
func (f *imageFake) NodeImageManifest(_ context.Context, node, image, digest string) ([]byte, string, error) {
	f.digest = digest
	if node != "n1" {
		return nil, "", fmt.Errorf("%w: image %s: not referenced by node %s", ErrForbidden, image, node)
	}
	return []byte(`{"schemaVersion":2}`), fakeDigest, nil
}
func (f *imageFake) OpenNodeBlob(_ context.Context, node, digest string) (*os.File, error) {
	if node != "n1" || digest != fakeDigest {
		return nil, fmt.Errorf("%w: blob %s", ErrForbidden, digest)
	}
	return os.Open(f.blob)
}
func (f *imageFake) AcquireNodeDownload(string) (func(), error) {
	if f.slots == 0 {
		return nil, fmt.Errorf("%w: node busy", ErrBusy)
	}
	f.slots--
	return func() { f.slots++; f.released++ }, nil
}

func newImageServer(t *testing.T) (*imageFake, *httptest.Server) {
	t.Helper()
	f := &imageFake{blob: filepath.Join(t.TempDir(), "blob"), slots: 1}
	require.NoError(t, os.WriteFile(f.blob, []byte("0123456789"), 0o600))
	srv := httptest.NewServer(NewServer(f, "secret-token", nil, nil))
	t.Cleanup(srv.Close)
	return f, srv
}

func nodeGet(t *testing.T, srv *httptest.Server, user, pass, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+NodeImagesPrefix+path, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestNodeImageEndpoints(t *testing.T) {
	f, srv := newImageServer(t)
	blob := "blobs/" + fakeDigest

	resp, _ := nodeGet(t, srv, "", "", blob, nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no credential")
	resp, _ = nodeGet(t, srv, "n1", "wrong", blob, nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "wrong token")
	resp, _ = nodeGet(t, srv, "", "", blob, map[string]string{"Authorization": "Bearer secret-token"})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API token is not a node credential")

	resp, body := nodeGet(t, srv, "n1", "t1", blob, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "0123456789", body)
	assert.Equal(t, `"`+fakeDigest+`"`, resp.Header.Get("ETag"))

	resp, body = nodeGet(t, srv, "n1", "t1", blob, map[string]string{"Range": "bytes=4-"})
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, "456789", body, "a range request resumes")
	assert.Equal(t, "bytes 4-9/10", resp.Header.Get("Content-Range"))

	resp, body = nodeGet(t, srv, "n2", "t2", blob, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	resp, body = nodeGet(t, srv, "n2", "t2", "manifests?image=app:v1", nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	assert.Contains(t, body, "app:v1")

	resp, body = nodeGet(t, srv, "n1", "t1", "manifests?image=app:v1", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, fakeDigest, resp.Header.Get("Docker-Content-Digest"))
	assert.Empty(t, f.digest)
	resp, body = nodeGet(t, srv, "n1", "t1", "manifests?image=app:v1&digest="+fakeDigest, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, fakeDigest, f.digest, "a fetch by digest passes the digest")
	resp, _ = nodeGet(t, srv, "n1", "t1", "manifests", nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "no image named")

	f.slots = 0
	resp, body = nodeGet(t, srv, "n1", "t1", blob, nil)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	assert.Equal(t, 3, f.released, "every download released its slot")
}

func TestNodeImageAuthThrottled(t *testing.T) {
	f := &imageFake{slots: 1}
	srv := httptest.NewServer(New(f, Options{Token: "secret-token", Limits: Limits{AuthFailures: 2, AuthFailureWindow: 60e9}}))
	t.Cleanup(srv.Close)
	for range 2 {
		resp, _ := nodeGet(t, srv, "n1", "wrong", "manifests?image=a", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	resp, _ := nodeGet(t, srv, "n1", "t1", "manifests?image=a", nil)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a source failing too often is blocked, right token or not")
}

func TestAdminImageEndpoints(t *testing.T) {
	f, srv := newImageServer(t)
	c := NewClient(srv.URL, "secret-token", srv.Client())
	got, err := c.PushImage(t.Context(), strings.NewReader("archive bytes"), "app:v1")
	require.NoError(t, err)
	assert.Equal(t, "archive bytes", f.pushed)
	assert.Equal(t, []Image{{Name: "app:v1"}}, got)

	list, err := c.ListImages(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(100), list.Quota)

	_, err = c.RemoveImage(t.Context(), "app:v1", false)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusConflict, se.Code)
	_, err = c.RemoveImage(t.Context(), "app:v1", true)
	require.NoError(t, err)

	bad := NewClient(srv.URL, "wrong", srv.Client())
	_, err = bad.ListImages(t.Context())
	require.ErrorIs(t, err, ErrUnauthorized)
	_, err = bad.PushImage(t.Context(), strings.NewReader("x"), "")
	require.ErrorIs(t, err, ErrUnauthorized)
}
