package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sourcesBackend serves sources and notes an invalid one on /readyz.
type sourcesBackend struct {
	fakeBackend
	srcs []Source
}

func (b *sourcesBackend) Sources(context.Context) ([]Source, error) { return b.srcs, nil }
func (b *sourcesBackend) ReadyNotes(context.Context) []string {
	return []string{"warning: manifest file bad.yaml is invalid"}
}

var _ ReadyNoter = (*sourcesBackend)(nil)

func TestSourcesAndReadyNotes(t *testing.T) {
	b := &sourcesBackend{srcs: []Source{{Path: "bad.yaml", Status: SourceInvalid, Errors: []string{"bad.yaml:1: kind: required"}}}}
	srv := httptest.NewServer(NewServer(b, "secret-token", nil, nil))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, "secret-token", srv.Client())

	got, err := c.Sources(context.Background())
	require.NoError(t, err)
	assert.Equal(t, b.srcs, got)

	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "an invalid manifest file is a note, not unreadiness")
	assert.Equal(t, "ok\nwarning: manifest file bad.yaml is invalid\n", string(body))
}
