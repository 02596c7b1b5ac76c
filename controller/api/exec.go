package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ExecRequest asks to run a command in a daemonset's instance on one node
// (POST /daemonsets/{namespace}/{name}/exec), as kubectl exec does
// without a terminal: the command is an argv, not a shell line.
type ExecRequest struct {
	Node      string   `json:"node"`
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command"`
	// Stdin is the command's whole standard input.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutSeconds ends the session (default 60, at most 3600).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// ExecChunk is one line of an exec answer (application/x-ndjson): output
// of Stream "stdout" or "stderr", and last a chunk with ExitCode or Error.
type ExecChunk struct {
	Stream    string `json:"stream,omitempty"`
	Data      string `json:"data,omitempty"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Error     string `json:"error,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Last reports whether c ends the session.
func (c ExecChunk) Last() bool { return c.ExitCode != nil || c.Error != "" }

// ExecStream is a running session's output, in order.
type ExecStream interface {
	// Next returns the next chunk; after the last one, io.EOF.
	Next() (ExecChunk, error)
	// Close ends the session, cancelling it on the node unless it ended.
	Close() error
}

// Execer is implemented by a Backend that runs commands on nodes.
// requester names the API client, for the node's log.
type Execer interface {
	Exec(ctx context.Context, daemonSet string, req ExecRequest, requester string) (ExecStream, error)
}

// exec serves POST /daemonsets/{namespace}/{name}/exec: an error before
// the session starts (unknown daemonset or node, an offline node, a node
// whose policy refuses exec) is answered with its status; then the
// chunks are streamed as they come, one JSON object a line.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	e, ok := s.backend.(Execer)
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: this controller does not exec", ErrUnavailable))
		return
	}
	var req ExecRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	beforeWrite := func() { s.startWriteTimeout(w) }
	st, err := e.Exec(r.Context(), dsKey(r), req, requesterOf(r))
	if err != nil {
		beforeWrite()
		s.writeError(w, r, err)
		return
	}
	defer st.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	beforeWrite()
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		c, err := st.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			c = ExecChunk{Error: err.Error()}
		}
		beforeWrite()
		if enc.Encode(c) != nil || rc.Flush() != nil || c.Last() {
			return
		}
	}
}

// Exec runs req in daemonset's instance on req.Node and hands every chunk
// of its output to emit, in order; it returns the command's exit code, or
// an error if the session failed.
func (c *Client) Exec(ctx context.Context, daemonSet string, req ExecRequest, emit func(ExecChunk) error) (int, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	path := "/daemonsets/" + escapeKey(daemonSet) + "/exec"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/"+Version+path, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build request POST %s: %w", path, err)
	}
	hreq.Header.Set("Authorization", "Bearer "+c.token)
	hreq.Header.Set("Content-Type", "application/json")
	streaming := *c.http
	streaming.Timeout = 0 // the session's own timeout bounds it
	resp, err := streaming.Do(hreq)
	if err != nil {
		return 0, c.transportError(ctx, http.MethodPost, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, decodeResponse(resp, nil)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var ch ExecChunk
		if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
			return 0, fmt.Errorf("%w: exec answer: %v", ErrNotController, err)
		}
		if err := emit(ch); err != nil {
			return 0, err
		}
		switch {
		case ch.Error != "":
			return 0, errors.New(ch.Error)
		case ch.ExitCode != nil:
			return *ch.ExitCode, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read exec answer: %w", err)
	}
	return 0, errors.New("the exec answer ended before the command did")
}
