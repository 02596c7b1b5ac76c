package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/schema"
)

// logChunkBuffer is how many chunks of one stream wait for the HTTP client;
// beyond it chunks are dropped and the gap is reported in the text.
const logChunkBuffer = 256

// hub routes the chunks of on-demand node answers (logs/response,
// exec/response) to the requests waiting for them, by request ID. The
// zero value is ready to use.
type hub[C any] struct {
	mu      sync.Mutex            // guards streams
	streams map[string]*stream[C] // by request ID
}

// stream is one pending request's inbox.
type stream[C any] struct {
	node   string
	chunks chan C
}

func (h *hub[C]) add(id, node string) *stream[C] {
	s := &stream[C]{node: node, chunks: make(chan C, logChunkBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams == nil {
		h.streams = map[string]*stream[C]{}
	}
	h.streams[id] = s
	return s
}

func (h *hub[C]) remove(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, id)
}

// deliver hands chunk c of request id to its stream without blocking. A
// chunk of no pending request (late, or after a cancel) is ignored; one
// from a node the request did not ask is an error.
func (h *hub[C]) deliver(node, id string, c C) error {
	h.mu.Lock()
	s, ok := h.streams[id]
	h.mu.Unlock()
	if !ok {
		return nil
	}
	if s.node != node {
		return fmt.Errorf("chunk of request %s from node %s, asked %s", id, node, s.node)
	}
	select {
	case s.chunks <- c:
	default: // the reader is behind; it sees the gap in Seq
	}
	return nil
}

// onLogChunk handles a logs/response message.
func (c *Controller) onLogChunk(node string, payload []byte) error {
	chunk, err := schema.DecodeLogChunk(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, chunk.Node); err != nil {
		return err
	}
	return c.logs.deliver(node, chunk.ID, chunk)
}

// Logs implements api.Backend: it asks the node for the log and returns it
// once the node answered with the first chunk. An unknown daemonset or node
// is api.ErrNotFound with suggestions, a silent node api.ErrTimeout.
// Closing the stream before its end cancels it on the node.
func (c *Controller) Logs(ctx context.Context, req api.LogsRequest) (io.ReadCloser, error) {
	if err := c.checkLogsRequest(req); err != nil {
		return nil, err
	}
	id, err := newLogID()
	if err != nil {
		return nil, err
	}
	s := c.logs.add(id, req.Node)
	follow := req.Follow && !req.Previous
	r := &logReader{c: c, ctx: ctx, id: id, node: req.Node, stream: s, follow: follow,
		answer: c.cfg.logAnswerTimeout, deadline: c.now().Add(c.cfg.logFollowLimit)}
	lr := schema.LogRequest{
		SchemaVersion: schema.WireVersion, Node: req.Node, ID: id, DaemonSet: req.DaemonSet,
		Container: req.Container, Tail: req.Tail, Follow: follow, Previous: req.Previous,
	}
	if err := c.publishLogRequest(ctx, lr); err != nil {
		c.logs.remove(id)
		return nil, fmt.Errorf("%w: ask node %s for logs: %v", api.ErrUnavailable, req.Node, err)
	}
	first, err := r.next()
	if err != nil {
		r.Close()
		return nil, err
	}
	if first.Error != "" {
		r.Close()
		return nil, chunkError(req.Node, first.Error)
	}
	r.pending = first.Data
	r.done = first.EOF
	return r, nil
}

// chunkError classifies the error a node answered before any log.
func chunkError(node, msg string) error {
	if strings.HasPrefix(msg, "no instance of daemonset") || strings.Contains(msg, "has no container") || strings.Contains(msg, "no terminated run") {
		return fmt.Errorf("%w: node %s: %s", api.ErrNotFound, node, msg)
	}
	return fmt.Errorf("%w: node %s: %s", api.ErrUnavailable, node, msg)
}

// checkLogsRequest validates req and that its daemonset and node exist.
func (c *Controller) checkLogsRequest(req api.LogsRequest) error {
	if req.Container != "" && !schema.IsDNS1123Label(req.Container) {
		return fmt.Errorf("%w: invalid container name %q", api.ErrInvalid, req.Container)
	}
	if req.Tail < 0 {
		return fmt.Errorf("%w: tail must be >= 0, not %d", api.ErrInvalid, req.Tail)
	}
	if e, ok := c.state.entry(req.DaemonSet); !ok || e.orphan() {
		keys := c.state.managedKeys()
		msg := fmt.Sprintf("daemonset %q", req.DaemonSet)
		if close := api.Suggest(req.DaemonSet, keys, 3); len(close) > 0 {
			msg += "; did you mean " + strings.Join(close, ", ") + "?"
		}
		return fmt.Errorf("%w: %s", api.ErrNotFound, msg)
	}
	now := c.now()
	nodes, _ := c.registry.Snapshot(now, c.cfg.NodeOfflineGrace)

	if !slices.ContainsFunc(nodes, func(n schema.Node) bool { return n.Name == req.Node }) {
		return c.unknownNode(req.Node, nodes)
	}
	if st, _ := c.registry.State(req.Node); !st.Online {
		return fmt.Errorf("%w: node %s is offline%s: its agent cannot send logs until it reconnects", api.ErrUnavailable, req.Node, seenAgo(st, now))
	}
	return nil
}

// seenAgo says when a node was last seen (or went offline), for errors.
func seenAgo(st registry.NodeState, now time.Time) string {
	last := st.LastSeen
	if st.OfflineSince.After(last) {
		last = st.OfflineSince
	}
	if last.IsZero() {
		return " (never seen online)"
	}
	return fmt.Sprintf(" (last seen %s, %s ago)", last.UTC().Format(time.RFC3339), now.Sub(last).Round(time.Second))
}

func (c *Controller) publishLogRequest(ctx context.Context, req schema.LogRequest) error {
	payload, err := schema.Encode(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.publish(ctx, schema.NodeTopic(req.Node, schema.TopicLogsRequest), payload, false)
}

func newLogID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("log stream id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// logReader is the text of one log stream. ctx is the caller's (the HTTP
// request's): Read fails once it ends. Read and Close are not safe for
// concurrent use.
type logReader struct {
	c        *Controller
	ctx      context.Context
	id, node string
	stream   *stream[schema.LogChunk]
	follow   bool
	answer   time.Duration // wait for the first chunk, and each next one when not following
	deadline time.Time     // of a follow stream

	seq     int    // next expected chunk
	pending string // text received, not yet read
	done    bool   // the EOF chunk arrived
	closed  bool
}

// Read returns the stream's text, io.EOF after the last chunk, or the
// error a node reported mid-stream.
func (r *logReader) Read(p []byte) (int, error) {
	for r.pending == "" {
		if r.done {
			return 0, io.EOF
		}
		ch, err := r.next()
		if err != nil {
			return 0, err
		}
		if ch.Error != "" {
			r.done = true
			return 0, fmt.Errorf("node %s: %s", r.node, ch.Error)
		}
		r.pending, r.done = ch.Data, ch.EOF
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// next waits for the next chunk in order. Duplicates (QoS 1 redelivery)
// are skipped; a gap becomes a note in the text.
func (r *logReader) next() (schema.LogChunk, error) {
	timeout := r.answer
	if r.follow && r.seq > 0 {
		timeout = r.deadline.Sub(r.c.now())
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return schema.LogChunk{}, r.ctx.Err()
		case <-t.C:
			return schema.LogChunk{}, r.c.unanswered(r.node, schema.TopicLogsRequest, timeout)
		case ch := <-r.stream.chunks:
			if ch.Seq < r.seq {
				continue
			}
			if lost := ch.Seq - r.seq; lost > 0 {
				ch.Data = fmt.Sprintf("\n[edgeset: %d log chunk(s) lost]\n", lost) + ch.Data
			}
			r.seq = ch.Seq + 1
			return ch, nil
		}
	}
}

// Close ends the stream, cancelling it on the node unless it ended.
func (r *logReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.c.logs.remove(r.id)
	if r.done {
		return nil
	}
	err := r.c.publishLogRequest(context.WithoutCancel(r.ctx), schema.LogRequest{
		SchemaVersion: schema.WireVersion, Node: r.node, ID: r.id, Cancel: true,
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		r.c.log.Debug("cancel log stream", "node", r.node, "id", r.id, "err", err)
	}
	return nil
}
