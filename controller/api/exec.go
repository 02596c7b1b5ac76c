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
	"net/url"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// ExecRequest asks to run a command in a daemonset's instance on one node
// (POST /daemonsets/{namespace}/{name}/exec), as kubectl exec does: the
// command is an argv, not a shell line.
type ExecRequest struct {
	Node      string   `json:"node"`
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command"`
	// Stdin is the command's whole standard input.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutSeconds ends the session (default 60, at most 3600).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// StdinStream (kubectl exec -i) attaches the command's standard
	// input, sent as the session goes in ExecInput calls (Stdin must
	// then be empty); TTY (-t) runs it on a terminal of Width x Height
	// characters (0: the engine's default), its stderr merged into
	// stdout. Either makes the session interactive: the answer's first
	// line names the session (ExecChunk.Session) that ExecInput takes.
	StdinStream bool `json:"stdinStream,omitempty"`
	TTY         bool `json:"tty,omitempty"`
	Width       int  `json:"width,omitempty"`
	Height      int  `json:"height,omitempty"`
	// IdleTimeoutSeconds ends an interactive session after this long
	// without input or output (default 600, at most 3600).
	IdleTimeoutSeconds int `json:"idleTimeoutSeconds,omitempty"`
}

// Interactive reports whether the session takes input as it goes.
func (r ExecRequest) Interactive() bool { return r.StdinStream || r.TTY }

// ExecChunk is one line of an exec answer (application/x-ndjson): first,
// for an interactive session, one naming the Session; then output of
// Stream "stdout" or "stderr"; last a chunk with ExitCode or Error.
type ExecChunk struct {
	Session   string `json:"session,omitempty"`
	Stream    string `json:"stream,omitempty"`
	Data      string `json:"data,omitempty"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Error     string `json:"error,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// ExecInput is one chunk of an interactive session's input (POST
// /daemonsets/{namespace}/{name}/exec/{session}/input): Data for the
// command's standard input (bytes, base64 in JSON, at most 8 KiB), EOF to
// close it, Resize to resize its terminal. Seq numbers the chunks from 0;
// the controller takes them in order (a chunk sent again is a no-op, one
// out of order a 409) and paces a session's input to 64 KiB/s.
type ExecInput struct {
	Seq    int                  `json:"seq"`
	Data   []byte               `json:"data,omitempty"`
	EOF    bool                 `json:"eof,omitempty"`
	Resize *schema.TerminalSize `json:"resize,omitempty"`
}

// Last reports whether c ends the session.
func (c ExecChunk) Last() bool { return c.ExitCode != nil || c.Error != "" }

// ExecStream is a running session's output, in order.
type ExecStream interface {
	// Session is the session's ID, which ExecInput takes for an
	// interactive session.
	Session() string
	// Next returns the next chunk; after the last one, io.EOF.
	Next() (ExecChunk, error)
	// Close ends the session, cancelling it on the node unless it ended.
	Close() error
}

// Execer is implemented by a Backend that runs commands on nodes.
// requester names the API client, for the node's log; owner is the API
// user, the only one whose ExecInput an interactive session takes.
type Execer interface {
	Exec(ctx context.Context, daemonSet string, req ExecRequest, requester, owner string) (ExecStream, error)
	// ExecInput sends in to interactive session of daemonSet that owner
	// started: ErrNotFound for no such session (or another user's),
	// ErrConflict for a chunk out of order, ErrInvalid for a bad one.
	ExecInput(ctx context.Context, daemonSet, session string, in ExecInput, owner string) error
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
	if err := noteAudit(r.Context(), execDetail(req)); err != nil {
		s.writeError(w, r, err)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	beforeWrite := func() { s.startWriteTimeout(w) }
	st, err := e.Exec(r.Context(), dsKey(r), req, requesterOf(r), ownerOf(r))
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
	if req.Interactive() && (enc.Encode(ExecChunk{Session: st.Session()}) != nil || rc.Flush() != nil) {
		return
	}
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

// execDetail is what the audit log records of req: the node, container
// and command (never the standard input).
func execDetail(req ExecRequest) string {
	d := fmt.Sprintf("node=%s container=%q command=%q", req.Node, req.Container, req.Command)
	if req.StdinStream {
		d += " stdin"
	}
	if req.TTY {
		d += " tty"
	}
	return d
}

// ownerOf names the user of r, whose interactive sessions r may feed.
func ownerOf(r *http.Request) string {
	u, _ := UserFrom(r.Context())
	return u.Name
}

// execInput serves POST /daemonsets/{namespace}/{name}/exec/{session}/input.
func (s *Server) execInput(_ http.ResponseWriter, r *http.Request) (any, error) {
	e, ok := s.backend.(Execer)
	if !ok {
		return nil, fmt.Errorf("%w: this controller does not exec", ErrUnavailable)
	}
	var in ExecInput
	if err := decodeBody(r, &in); err != nil {
		return nil, err
	}
	if err := e.ExecInput(r.Context(), dsKey(r), r.PathValue("session"), in, ownerOf(r)); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// ExecInput sends one chunk of input to interactive session of daemonSet
// (ExecChunk.Session). A chunk sent again (after a lost answer) is a no-op.
func (c *Client) ExecInput(ctx context.Context, daemonSet, session string, in ExecInput) error {
	return c.doJSONValue(ctx, http.MethodPost, "/daemonsets/"+escapeKey(daemonSet)+"/exec/"+url.PathEscape(session)+"/input", in, nil)
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
