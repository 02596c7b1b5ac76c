package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// execSlack is how long past a session's timeout the controller waits for
// the node's last chunk before giving up on it.
const execSlack = 15 * time.Second

var _ api.Execer = (*Controller)(nil)

// Exec implements api.Execer: it asks the node to run req in ds's
// instance and returns the session once the node answered with its first
// chunk (for an interactive session, the one saying it reads its input).
// An unknown daemonset or node is api.ErrNotFound, an offline one
// api.ErrUnavailable, a silent node api.ErrTimeout, a node whose local
// policy disallows exec api.ErrForbidden. Closing the session before its
// end cancels it on the node.
func (c *Controller) Exec(ctx context.Context, ds string, req api.ExecRequest, requester, owner string) (api.ExecStream, error) {
	if err := c.checkExecRequest(ds, req); err != nil {
		return nil, err
	}
	id, err := newLogID()
	if err != nil {
		return nil, err
	}
	if req.Interactive() {
		if _, err := c.execInputs.add(id, req.Node, ds, owner); err != nil {
			return nil, err
		}
	}
	timeout := req.TimeoutSeconds
	if timeout == 0 {
		timeout = schema.DefaultExecTimeoutSeconds
	}
	st := c.execs.add(id, req.Node)
	s := &execSession{c: c, ctx: ctx, id: id, node: req.Node, stream: st, answer: c.cfg.logAnswerTimeout,
		deadline: c.now().Add(time.Duration(timeout)*time.Second + execSlack)}
	er := schema.ExecRequest{SchemaVersion: schema.WireVersion, Node: req.Node, ID: id, DaemonSet: ds, Container: req.Container,
		Command: req.Command, Stdin: req.Stdin, TimeoutSeconds: timeout, Requester: requester,
		StdinStream: req.StdinStream, TTY: req.TTY, Width: req.Width, Height: req.Height, IdleTimeoutSeconds: req.IdleTimeoutSeconds}
	if err := c.publishExecRequest(ctx, er); err != nil {
		c.execs.remove(id)
		c.execInputs.remove(id)
		return nil, fmt.Errorf("%w: ask node %s to exec: %v", api.ErrUnavailable, req.Node, err)
	}
	c.log.Info("exec", "daemonset", ds, "node", req.Node, "container", req.Container, "command", req.Command,
		"stdin", req.StdinStream, "tty", req.TTY, "requester", requester)
	first, err := s.wait()
	if err != nil {
		s.Close()
		return nil, err
	}
	if first.Error != "" && first.EOF {
		s.Close()
		return nil, execError(req.Node, first.Error)
	}
	if !first.Ready {
		s.first = &first
	}
	return s, nil
}

// execError classifies the error a node answered before any output.
func execError(node, msg string) error {
	switch {
	case strings.Contains(msg, "local policy"):
		return fmt.Errorf("%w: node %s: %s", api.ErrForbidden, node, msg)
	case strings.HasPrefix(msg, "no instance of daemonset") || strings.Contains(msg, "has no container"):
		return fmt.Errorf("%w: node %s: %s", api.ErrNotFound, node, msg)
	case strings.Contains(msg, "is not running"):
		return fmt.Errorf("%w: node %s: %s", api.ErrInvalid, node, msg)
	}
	return fmt.Errorf("%w: node %s: %s", api.ErrUnavailable, node, msg)
}

// checkExecRequest validates req and that ds and its node exist.
func (c *Controller) checkExecRequest(ds string, req api.ExecRequest) error {
	if req.Node == "" {
		return fmt.Errorf("%w: node is required", api.ErrInvalid)
	}
	var problems []string
	schema.ValidateExecCommand(func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}, req.Command)
	if len(req.Stdin) > schema.MaxExecStdinBytes {
		problems = append(problems, fmt.Sprintf("stdin: %d bytes, limit %d", len(req.Stdin), schema.MaxExecStdinBytes))
	}
	if req.StdinStream && req.Stdin != "" {
		problems = append(problems, "stdin: must be empty with stdinStream: the input comes in ExecInput calls")
	}
	schema.ValidateExecInteractive(func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}, req.StdinStream, req.TTY, req.Width, req.Height, req.IdleTimeoutSeconds)
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > schema.MaxExecTimeoutSeconds {
		problems = append(problems, fmt.Sprintf("timeoutSeconds: must be between 0 and %d, not %d", schema.MaxExecTimeoutSeconds, req.TimeoutSeconds))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", api.ErrInvalid, strings.Join(problems, "; "))
	}
	return c.checkLogsRequest(api.LogsRequest{DaemonSet: ds, Node: req.Node, Container: req.Container})
}

func (c *Controller) publishExecRequest(ctx context.Context, req schema.ExecRequest) error {
	payload, err := schema.Encode(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.publish(ctx, schema.NodeTopic(req.Node, schema.TopicExecRequest), payload, false)
}

// onExecChunk handles an exec/response message.
func (c *Controller) onExecChunk(node string, payload []byte) error {
	chunk, err := schema.DecodeExecChunk(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, chunk.Node); err != nil {
		return err
	}
	return c.execs.deliver(node, chunk.ID, chunk)
}

// execSession is one running exec's output. ctx is the caller's (the HTTP
// request's). Next and Close are not safe for concurrent use.
type execSession struct {
	c        *Controller
	ctx      context.Context
	id, node string
	stream   *stream[schema.ExecChunk]
	answer   time.Duration // wait for the first chunk
	deadline time.Time     // the session's timeout, and some slack

	seq    int               // next expected chunk
	first  *schema.ExecChunk // the first chunk, not yet returned
	done   bool              // the last chunk arrived
	closed bool
}

// Next returns the session's next chunk, io.EOF after the last.
func (s *execSession) Next() (api.ExecChunk, error) {
	if s.done {
		return api.ExecChunk{}, io.EOF
	}
	var ch schema.ExecChunk
	if s.first != nil {
		ch, s.first = *s.first, nil
	} else {
		var err error
		if ch, err = s.wait(); err != nil {
			s.done = true
			return api.ExecChunk{}, err
		}
	}
	s.done = ch.EOF
	out := api.ExecChunk{Stream: ch.Stream, Data: ch.Data, ExitCode: ch.ExitCode, Error: ch.Error, Truncated: ch.Truncated}
	if ch.EOF && ch.ExitCode == nil && ch.Error == "" {
		out.Error = "the node ended the session without an exit code"
	}
	return out, nil
}

// wait waits for the next chunk in order. Duplicates are skipped; a gap
// becomes a note on stderr.
func (s *execSession) wait() (schema.ExecChunk, error) {
	timeout := s.answer
	if s.seq > 0 {
		timeout = s.deadline.Sub(s.c.now())
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return schema.ExecChunk{}, s.ctx.Err()
		case <-t.C:
			return schema.ExecChunk{}, s.c.unanswered(s.node, schema.TopicExecRequest, timeout)
		case ch := <-s.stream.chunks:
			if ch.Seq < s.seq {
				continue
			}
			if lost := ch.Seq - s.seq; lost > 0 && ch.Data != "" {
				ch.Data = fmt.Sprintf("\n[edgeset: %d output chunk(s) lost]\n", lost) + ch.Data
			}
			s.seq = ch.Seq + 1
			return ch, nil
		}
	}
}

// Session implements api.ExecStream.
func (s *execSession) Session() string { return s.id }

// Close ends the session, cancelling it on the node unless it ended.
func (s *execSession) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.c.execs.remove(s.id)
	s.c.execInputs.remove(s.id)
	if s.done {
		return nil
	}
	err := s.c.publishExecRequest(context.WithoutCancel(s.ctx), schema.ExecRequest{
		SchemaVersion: schema.WireVersion, Node: s.node, ID: s.id, Cancel: true,
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.c.log.Debug("cancel exec session", "node", s.node, "id", s.id, "err", err)
	}
	return nil
}
