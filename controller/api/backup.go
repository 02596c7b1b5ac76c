package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Backuper is implemented by a Backend that can copy its store while it
// serves (GET /api/v1/backup, edgeset-controller backup).
type Backuper interface {
	// Backup writes a consistent copy of the store to w; started is told
	// the copy's size before anything is written.
	Backup(ctx context.Context, w io.Writer, started func(size int64)) error
}

// backup streams a copy of the store, with its size as Content-Length so
// that a cut copy is noticed. A failure after the first byte aborts the
// response. ServeHTTP has authenticated the request.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	b, ok := s.backend.(Backuper)
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: this controller cannot back up its store", ErrNotFound))
		return
	}
	// A large store takes longer to copy than the server's write timeout,
	// so each write gets it afresh: only a client that stops reading is
	// cut. The copy holds a read transaction, which holds up every write
	// that must grow the store's file: it must never be held for good.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	began := false
	err := b.Backup(r.Context(), freshDeadline{w, func() { s.startWriteTimeout(w) }}, func(size int64) {
		began = true
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="edgeset.db"`)
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
	})
	switch {
	case err == nil:
		s.log.Info("store backup sent", "remote", r.RemoteAddr)
	case !began:
		s.writeError(w, r, err)
	default:
		s.log.Warn("store backup cut short", "remote", r.RemoteAddr, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// freshDeadline is a response writer whose every Write gets the server's
// write timeout afresh (fresh).
type freshDeadline struct {
	w     http.ResponseWriter
	fresh func()
}

func (f freshDeadline) Write(p []byte) (int, error) {
	f.fresh()
	return f.w.Write(p)
}

// Backup copies the controller's store to w and returns the bytes
// written; a copy shorter than the size the controller announced is an
// error. Use a Client whose http.Client has no overall timeout for a large
// store.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/"+Version+"/backup", nil)
	if err != nil {
		return 0, fmt.Errorf("build backup request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("controller at %s is unreachable: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, decodeResponse(resp, nil)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("read backup from %s after %d bytes: %w", c.base, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("backup from %s cut short: %d of %d bytes", c.base, n, resp.ContentLength)
	}
	return n, nil
}
