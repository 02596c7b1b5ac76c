package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// fakeBackend answers the calls the tests make; any other call panics
// through the nil embedded interface.
type fakeBackend struct {
	Backend
	getNode    func(name string) (Node, error)
	updateNode func(name string, p NodePatch) (Node, error)
	apply      func(source string, data []byte, dryRun bool) ([]ApplyResult, error)
	ready      error
}

func (f *fakeBackend) GetNode(_ context.Context, name string) (Node, error) { return f.getNode(name) }
func (f *fakeBackend) UpdateNode(_ context.Context, name string, p NodePatch) (Node, error) {
	return f.updateNode(name, p)
}
func (f *fakeBackend) ApplyManifests(_ context.Context, source string, data []byte, opts ApplyOptions) ([]ApplyResult, error) {
	return f.apply(source, data, opts.DryRun)
}
func (f *fakeBackend) Ready(context.Context) error { return f.ready }

var _ Backend = (*fakeBackend)(nil)

func newTestServer(t *testing.T, b *fakeBackend) *Client { return newTestServerFor(t, b) }

func newTestServerFor(t *testing.T, b Backend) *Client {
	srv := httptest.NewServer(NewServer(b, "secret-token", nil, nil))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL, "secret-token", srv.Client())
}

func TestServerMapsErrors(t *testing.T) {
	b := &fakeBackend{getNode: func(name string) (Node, error) {
		switch name {
		case "missing":
			return Node{}, fmt.Errorf("%w: node %q; did you mean gw-1?", ErrNotFound, name)
		case "busy":
			return Node{}, fmt.Errorf("%w: first pass pending", ErrUnavailable)
		case "broken":
			return Node{}, errors.New("disk on fire")
		}
		return Node{Node: schema.Node{Name: name}}, nil
	}}
	c := newTestServer(t, b)
	ctx := context.Background()

	n, err := c.GetNode(ctx, "gw-1")
	require.NoError(t, err)
	assert.Equal(t, "gw-1", n.Name)

	tests := []struct {
		node string
		code int
		is   error
		msg  string
	}{
		{"missing", http.StatusNotFound, ErrNotFound, "did you mean gw-1?"},
		{"busy", http.StatusServiceUnavailable, ErrUnavailable, "first pass pending"},
		{"broken", http.StatusInternalServerError, nil, "disk on fire"},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			_, err := c.GetNode(ctx, tc.node)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.code, se.Code)
			assert.Contains(t, err.Error(), tc.msg)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

func TestServerRequiresToken(t *testing.T) {
	srv := httptest.NewServer(NewServer(&fakeBackend{}, "secret-token", nil, nil))
	t.Cleanup(srv.Close)
	for _, token := range []string{"", "wrong", "secret-token-and-more"} {
		_, err := NewClient(srv.URL, token, srv.Client()).GetNode(context.Background(), "x")
		assert.ErrorIs(t, err, ErrUnauthorized, "token %q", token)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "/healthz needs no token")
}

func TestServerReadyz(t *testing.T) {
	b := &fakeBackend{ready: fmt.Errorf("%w: waiting for the first reconcile pass", ErrUnavailable)}
	srv := httptest.NewServer(NewServer(b, "t", nil, nil))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	b.ready = nil
	resp, err = http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestServerRejectsBadBodies: unknown fields, malformed JSON and oversized
// bodies are 400s that change nothing.
func TestServerRejectsBadBodies(t *testing.T) {
	called := false
	b := &fakeBackend{
		updateNode: func(string, NodePatch) (Node, error) { called = true; return Node{}, nil },
		apply:      func(string, []byte, bool) ([]ApplyResult, error) { called = true; return nil, nil },
	}
	srv := httptest.NewServer(NewServer(b, "t", nil, nil))
	t.Cleanup(srv.Close)
	send := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e Error
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		return resp.StatusCode, e.Message
	}
	code, msg := send(http.MethodPatch, "/api/v1/nodes/gw", `{"labels":{"a":"b"},"unschedulabel":true}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, msg, "unschedulabel")
	code, _ = send(http.MethodPatch, "/api/v1/nodes/gw", `{not json`)
	assert.Equal(t, http.StatusBadRequest, code)
	code, msg = send(http.MethodPost, "/api/v1/apply", strings.Repeat("x", MaxRequestBytes+1))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, msg, "larger than")
	code, msg = send(http.MethodGet, "/api/v1/events?limit=-3", "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, msg, "limit")
	assert.False(t, called, "a rejected request reaches no backend method")
}

func TestServerValidationErrorListsFields(t *testing.T) {
	b := &fakeBackend{apply: func(string, []byte, bool) ([]ApplyResult, error) {
		return nil, &schema.ValidationError{Errors: []schema.FieldError{
			{File: "ds.yaml", Line: 9, Field: "spec.template.spec.containers[0].image", Message: "required"},
			{File: "ds.yaml", Line: 3, Field: "metadata.name", Message: `"Bad_Name" is not a DNS-1123 subdomain`},
		}}
	}}
	c := newTestServer(t, b)
	_, err := c.Apply(context.Background(), "ds.yaml", []byte("x"), false)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusUnprocessableEntity, se.Code)
	require.Len(t, se.Body.Fields, 2)
	assert.Contains(t, err.Error(), "ds.yaml:9: spec.template.spec.containers[0].image: required")
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestSuggest(t *testing.T) {
	names := []string{"gw-berlin-1", "gw-berlin-2", "gw-paris-1", "sensor-7"}
	assert.Equal(t, []string{"gw-berlin-1", "gw-berlin-2"}, Suggest("gw-berlin-3", names, 3)[:2])
	assert.Empty(t, Suggest("completely-different", names, 3))
	assert.Equal(t, 0, distance("abc", "abc"))
	assert.Equal(t, 3, distance("", "abc"))
}
