package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logsBackend answers Logs through logs.
type logsBackend struct {
	fakeBackend
	logs func(req LogsRequest) (io.ReadCloser, error)
}

func (b *logsBackend) Logs(_ context.Context, req LogsRequest) (io.ReadCloser, error) {
	return b.logs(req)
}

// failingLog yields text, then fails with err.
type failingLog struct {
	r   io.Reader
	err error
}

func (f *failingLog) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, f.err
	}
	return n, err
}

func (f *failingLog) Close() error { return nil }

func TestLogsEndpoint(t *testing.T) {
	var got LogsRequest
	b := &logsBackend{logs: func(req LogsRequest) (io.ReadCloser, error) {
		got = req
		switch req.Node {
		case "offline":
			return nil, fmt.Errorf("%w: node offline did not answer; is it online?", ErrTimeout)
		case "gone":
			return nil, fmt.Errorf("%w: node %q; did you mean gw-1?", ErrNotFound, req.Node)
		case "flaky":
			return &failingLog{r: strings.NewReader("partial\n"), err: errors.New("node flaky stopped answering")}, nil
		}
		return io.NopCloser(strings.NewReader("line 1\nline 2\n")), nil
	}}
	srv := httptest.NewServer(NewServer(b, "secret-token", nil, nil))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, "secret-token", srv.Client())
	ctx := context.Background()

	rc, err := c.Logs(ctx, LogsRequest{DaemonSet: "edge/agent", Node: "gw-1", Container: "main", Tail: 2, Follow: true})
	require.NoError(t, err)
	text, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, "line 1\nline 2\n", string(text))
	assert.Equal(t, LogsRequest{DaemonSet: "edge/agent", Node: "gw-1", Container: "main", Tail: 2, Follow: true}, got)

	rc, err = c.Logs(ctx, LogsRequest{DaemonSet: "edge/agent", Node: "gw-1", Previous: true})
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, LogsRequest{DaemonSet: "edge/agent", Node: "gw-1", Previous: true}, got, "previous reaches the backend")

	rc, err = c.Logs(ctx, LogsRequest{DaemonSet: "agent", Node: "flaky"})
	require.NoError(t, err)
	text, err = io.ReadAll(rc)
	assert.Equal(t, "partial\n", string(text))
	assert.EqualError(t, err, "node flaky stopped answering")
	assert.Equal(t, "default/agent", got.DaemonSet)

	tests := []struct {
		node string
		code int
		is   error
	}{
		{"offline", http.StatusGatewayTimeout, ErrTimeout},
		{"gone", http.StatusNotFound, ErrNotFound},
		{"", http.StatusBadRequest, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run("node "+tc.node, func(t *testing.T) {
			_, err := c.Logs(ctx, LogsRequest{DaemonSet: "edge/agent", Node: tc.node})
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.code, se.Code)
			assert.ErrorIs(t, err, tc.is)
		})
	}
}
