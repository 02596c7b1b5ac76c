package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// maxInteractiveExecs bounds the interactive exec sessions the controller
// holds at once (each node runs at most its own bound, two by default).
const maxInteractiveExecs = 256

// execInputPublishTimeout bounds the publish of one input chunk.
const execInputPublishTimeout = 10 * time.Second

// execInputs routes interactive exec sessions' input (POST
// .../exec/{session}/input) to their nodes' input topics. mu guards
// sessions; each session serialises its own input.
type execInputs struct {
	mu       sync.Mutex
	sessions map[string]*execInput // by session ID
}

// execInput is one interactive session's input side. mu guards next and
// closed, and is held across a chunk's pacing and publish, so the chunks
// go out one at a time, in order.
type execInput struct {
	node, daemonSet, owner string
	limiter                *rate.Limiter // paces the input (schema.ExecInputBytesPerSecond)

	mu     sync.Mutex
	next   int  // the Seq taken next
	closed bool // the session ended: nothing more is sent
}

// add registers session id's input, unless maxInteractiveExecs are held.
func (x *execInputs) add(id, node, daemonSet, owner string) (*execInput, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.sessions) >= maxInteractiveExecs {
		return nil, fmt.Errorf("%w: %d interactive exec sessions are open, the most this controller holds; try again later",
			api.ErrUnavailable, maxInteractiveExecs)
	}
	if x.sessions == nil {
		x.sessions = map[string]*execInput{}
	}
	in := &execInput{node: node, daemonSet: daemonSet, owner: owner,
		limiter: rate.NewLimiter(rate.Limit(schema.ExecInputBytesPerSecond), schema.ExecInputBurstBytes)}
	x.sessions[id] = in
	return in, nil
}

// remove forgets session id's input; a chunk being sent is the last.
func (x *execInputs) remove(id string) {
	x.mu.Lock()
	in := x.sessions[id]
	delete(x.sessions, id)
	x.mu.Unlock()
	if in != nil {
		in.mu.Lock()
		in.closed = true
		in.mu.Unlock()
	}
}

func (x *execInputs) get(id string) *execInput {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sessions[id]
}

// ExecInput implements api.Execer: it sends one chunk of an interactive
// session's input to the node, in order, paced to
// schema.ExecInputBytesPerSecond (the call waits its turn). A chunk
// already sent is a no-op (a client's retry), one ahead of the next is
// api.ErrConflict; a session that does not exist, ended, is of another
// daemonset or was started by another user is api.ErrNotFound.
func (c *Controller) ExecInput(ctx context.Context, ds, session string, in api.ExecInput, owner string) error {
	s := c.execInputs.get(session)
	if s == nil || s.daemonSet != ds || s.owner != owner {
		return fmt.Errorf("%w: no interactive exec session %q of daemonset %s (it ended, or it is not yours)", api.ErrNotFound, session, ds)
	}
	var problems []string
	schema.ValidateExecInputChunk(func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}, in.Data, in.EOF, in.Resize)
	if in.Seq < 0 {
		problems = append(problems, fmt.Sprintf("seq: must be >= 0, not %d", in.Seq))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", api.ErrInvalid, strings.Join(problems, "; "))
	}
	return s.send(ctx, c, session, in)
}

// send paces and publishes in, holding the session's turn.
func (s *execInput) send(ctx context.Context, c *Controller, session string, in api.ExecInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w: interactive exec session %q ended", api.ErrNotFound, session)
	case in.Seq < s.next:
		return nil // sent already: the client did not see the answer
	case in.Seq > s.next:
		return fmt.Errorf("%w: input chunk %d of session %q: the next one is %d", api.ErrConflict, in.Seq, session, s.next)
	}
	if err := pace(ctx, s.limiter, c.now(), schema.ExecInputCost(len(in.Data))); err != nil {
		return fmt.Errorf("%w: input chunk %d of session %q: %v", api.ErrUnavailable, in.Seq, session, err)
	}
	payload, err := schema.Encode(schema.ExecInput{SchemaVersion: schema.WireVersion, Node: s.node, ID: session,
		Seq: in.Seq, Data: in.Data, EOF: in.EOF, Resize: in.Resize})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, execInputPublishTimeout)
	defer cancel()
	if err := c.publish(pctx, schema.ExecInputTopic(s.node, session), payload, false); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%w: send input to node %s: %v", api.ErrUnavailable, s.node, err)
	}
	s.next++
	return nil
}

// errPaceDeadline: the wait for the rate would outlast the caller's
// deadline.
var errPaceDeadline = errors.New("would exceed context deadline")

// pace waits until lim allows n more, as rate.Limiter.WaitN does, with
// the tokens counted at now (the controller's clock, which tests
// control): n within what lim holds at now goes at once, whatever the
// caller's deadline; more waits its turn, unless that wait would outlast
// ctx's deadline, when it is refused at once and takes nothing.
func pace(ctx context.Context, lim *rate.Limiter, now time.Time, n int) error {
	r := lim.ReserveN(now, n)
	if !r.OK() {
		return fmt.Errorf("%d exceeds the limiter's burst %d", n, lim.Burst())
	}
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
		r.CancelAt(now)
		return errPaceDeadline
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.CancelAt(now)
		return ctx.Err()
	}
}
