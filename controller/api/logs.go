package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogsRequest asks for one container's log of a daemonset's instance on a
// node.
type LogsRequest struct {
	// DaemonSet is "namespace/name".
	DaemonSet string
	Node      string
	// Container names a container of the template; empty is the first.
	Container string
	// Tail is how many of the last lines to return; 0 returns all.
	Tail int
	// Follow keeps streaming new lines until the caller goes away or the
	// node's limit on a follow session passes.
	Follow bool
	// Previous returns the log of the container's last terminated run
	// instead of the current one (kubectl logs --previous); Follow is then
	// ignored. A container with no terminated run is ErrNotFound.
	Previous bool
}

// LogErrorTrailer is the HTTP trailer that carries why a log stream ended
// early, once the status line and some of the log have been sent.
const LogErrorTrailer = "X-Edgeset-Log-Error"

// logs serves GET .../daemonsets/{namespace}/{name}/logs as plain text,
// flushed per chunk. Errors before the first chunk get a status code;
// later ones the LogErrorTrailer. The stream outlives the read and write
// timeouts: each chunk gets the write timeout afresh.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	req, err := logsRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The node may take its time to answer; each write gets the write
	// timeout afresh, so only a client that stops reading is cut.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	beforeWrite := func() { s.startWriteTimeout(w) }
	rc, err := s.backend.Logs(r.Context(), req)
	if err != nil {
		beforeWrite()
		s.writeError(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Trailer", LogErrorTrailer)
	beforeWrite()
	w.WriteHeader(http.StatusOK)
	if err := copyFlushing(w, rc, beforeWrite); err != nil && r.Context().Err() == nil {
		w.Header().Set(LogErrorTrailer, err.Error())
	}
	beforeWrite() // for the trailer
}

func logsRequest(r *http.Request) (LogsRequest, error) {
	q := r.URL.Query()
	req := LogsRequest{DaemonSet: dsKey(r), Node: q.Get("node"), Container: q.Get("container")}
	if req.Node == "" {
		return req, fmt.Errorf("%w: query parameter node is required", ErrInvalid)
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return req, fmt.Errorf("%w: query parameter tail: %q is not a non-negative integer", ErrInvalid, v)
		}
		req.Tail = n
	}
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			return req, fmt.Errorf("%w: query parameter follow: %q is not a boolean", ErrInvalid, v)
		}
		req.Follow = f
	}
	if v := q.Get("previous"); v != "" {
		p, err := strconv.ParseBool(v)
		if err != nil {
			return req, fmt.Errorf("%w: query parameter previous: %q is not a boolean", ErrInvalid, v)
		}
		req.Previous = p
	}
	return req, nil
}

// copyFlushing copies src to w, flushing after every read, each write
// within the write timeout. A write error (the client went away or stopped
// reading) ends the copy without being reported.
func copyFlushing(w http.ResponseWriter, src io.Reader, beforeWrite func()) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			beforeWrite()
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if rc.Flush() != nil {
				return nil
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Logs streams a container's log. The stream ends with io.EOF when the
// log does, or with the error the controller reported; closing it early
// cancels the stream on the node. Unlike the other calls it is not bounded
// by the client's timeout: ctx bounds it.
func (c *Client) Logs(ctx context.Context, req LogsRequest) (io.ReadCloser, error) {
	q := url.Values{"node": {req.Node}}
	if req.Container != "" {
		q.Set("container", req.Container)
	}
	if req.Tail > 0 {
		q.Set("tail", strconv.Itoa(req.Tail))
	}
	if req.Follow {
		q.Set("follow", "true")
	}
	if req.Previous {
		q.Set("previous", "true")
	}
	path := "/daemonsets/" + escapeKey(req.DaemonSet) + "/logs?" + q.Encode()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/"+Version+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build request GET %s: %w", path, err)
	}
	hr.Header.Set("Authorization", "Bearer "+c.token)
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("controller at %s is unreachable: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		if err := decodeResponse(resp, nil); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("GET %s: unexpected HTTP %d", path, resp.StatusCode)
	}
	return &logBody{resp: resp}, nil
}

// logBody turns the error trailer into the stream's final error.
type logBody struct{ resp *http.Response }

func (b *logBody) Read(p []byte) (int, error) {
	n, err := b.resp.Body.Read(p)
	if errors.Is(err, io.EOF) {
		if msg := b.resp.Trailer.Get(LogErrorTrailer); msg != "" {
			return n, errors.New(msg)
		}
	}
	return n, err
}

func (b *logBody) Close() error { return b.resp.Body.Close() }
