package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint
}

// ExecOptions say how SessionExecer runs a command.
type ExecOptions struct {
	Cmd []string
	// TTY runs the command on a terminal of Size (zero: the engine's
	// default): its output is one stream, written to stdout.
	TTY  bool
	Size TerminalSize
}

// SessionExecer runs interactive exec sessions (edgesetctl exec -i/-t):
// what ExecServer needs of the runtime for them, beyond Execer.
// edgeagent/docker and edgeagent/fake implement it.
type SessionExecer interface {
	// ExecSession runs opts.Cmd in the running container id with stdin
	// (nil: none attached) and copies its output to stdout and stderr
	// (with a TTY all of it to stdout) until the process ends, then
	// returns its exit code. Each size received on resize resizes the
	// terminal. Once the output has ended it closes stdin, so that a
	// read blocked on it returns. When ctx ends the streams are closed
	// and ctx's error returned.
	ExecSession(ctx context.Context, id string, opts ExecOptions, stdin io.ReadCloser, stdout, stderr io.Writer, resize <-chan TerminalSize) (int, error)
}

// errIdle ends an interactive session without input or output.
var errIdle = errors.New("exec idle")

// sessionInput is the input side of one interactive session: Handle
// feeds it chunks (never blocking), its pump writes them to the command.
type sessionInput struct {
	cancel context.CancelCauseFunc // ends the session with a cause
	idle   *idleWatch

	mu    sync.Mutex // guards seq
	seq   *inputSequencer
	queue chan schema.ExecInput // chunks in order, for the pump
}

func newSessionInput(cancel context.CancelCauseFunc, idle *idleWatch) *sessionInput {
	return &sessionInput{cancel: cancel, idle: idle, seq: newInputSequencer(schema.MaxExecInputPending),
		queue: make(chan schema.ExecInput, schema.MaxExecInputPending)}
}

// feed takes one chunk from the session's input topic. A lost chunk, or
// more waiting than the bound, ends the session: input is never dropped.
func (in *sessionInput) feed(m schema.ExecInput) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.idle.touch()
	ready, err := in.seq.accept(m)
	if err != nil {
		in.cancel(err)
		return
	}
	for _, r := range ready {
		select {
		case in.queue <- r:
		default:
			in.cancel(fmt.Errorf("%w: the command has not read %d chunks of input", errInputOverflow, cap(in.queue)))
			return
		}
	}
}

// pump applies the chunks in order until ctx ends: data to stdin (nil:
// none attached, data dropped), eof closes it, resize goes to resize
// (nil without a terminal), only the latest size kept. A write blocked
// on a command that does not read returns when the session's end closes
// the pipe.
func (in *sessionInput) pump(ctx context.Context, stdin *io.PipeWriter, resize chan TerminalSize) {
	for {
		var m schema.ExecInput
		select {
		case <-ctx.Done():
			return
		case m = <-in.queue:
		}
		if len(m.Data) > 0 && stdin != nil {
			if _, err := stdin.Write(m.Data); err != nil {
				stdin = nil // the command closed its input or ended
			}
		}
		if m.EOF && stdin != nil {
			_ = stdin.Close()
			stdin = nil
		}
		if m.Resize != nil && resize != nil {
			latest(resize, TerminalSize{Width: uint(m.Resize.Width), Height: uint(m.Resize.Height)})
		}
	}
}

// latest puts size on c (capacity 1), replacing a size not yet taken.
func latest(c chan TerminalSize, size TerminalSize) {
	for {
		select {
		case c <- size:
			return
		default:
		}
		select {
		case <-c:
		default:
		}
	}
}

// idleWatch ends a session after d without activity (input or output).
type idleWatch struct {
	d    time.Duration
	last atomic.Int64 // unix nanoseconds of the last activity
}

func newIdleWatch(d time.Duration) *idleWatch {
	w := &idleWatch{d: d}
	w.touch()
	return w
}

func (w *idleWatch) touch() { w.last.Store(time.Now().UnixNano()) }

// run cancels the session with errIdle once d passed since the last
// activity; it returns when ctx ends.
func (w *idleWatch) run(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTimer(w.d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		left := w.d - time.Since(time.Unix(0, w.last.Load()))
		if left <= 0 {
			cancel(fmt.Errorf("%w for %s: no input or output", errIdle, w.d))
			return
		}
		t.Reset(left)
	}
}

// activeWriter notes every write as activity.
type activeWriter struct {
	w    io.Writer
	idle *idleWatch
}

func (a activeWriter) Write(p []byte) (int, error) {
	a.idle.touch()
	return a.w.Write(p)
}

// interactive runs an interactive session in container c: it registers
// the session's input, subscribes to its input topic, says Ready, and
// runs the command with the input pumped to it, until the command ends
// or ctx does (cancel ends it with a cause: idle, input lost or
// overflowing, a cancel request).
func (s *ExecServer) interactive(ctx context.Context, cancel context.CancelCauseFunc, req schema.ExecRequest, c ContainerState, out *execSession) (int, error) {
	execer, ok := s.opts.Execer.(SessionExecer)
	if !ok {
		return 0, fmt.Errorf("the runtime of node %s cannot run interactive exec sessions", s.opts.NodeName)
	}
	idleFor := time.Duration(req.IdleTimeoutSeconds) * time.Second
	if idleFor == 0 {
		idleFor = schema.DefaultExecIdleTimeoutSeconds * time.Second
	}
	idle := newIdleWatch(idleFor)
	in := newSessionInput(cancel, idle)
	topic := schema.ExecInputTopic(s.opts.NodeName, req.ID)
	s.setInput(req.ID, in)
	defer s.setInput(req.ID, nil)
	if err := s.opts.Conn.Subscribe(ctx, topic); err != nil {
		return 0, fmt.Errorf("subscribe to the session's input %s: %w", topic, err)
	}
	defer s.unsubscribe(topic)
	if err := out.ready(ctx); err != nil {
		return 0, fmt.Errorf("say ready: %w", err)
	}

	var stdinR *io.PipeReader
	var stdinW *io.PipeWriter
	var stdin io.ReadCloser // nil unless attached: a nil *PipeReader is not
	if req.StdinStream {
		stdinR, stdinW = io.Pipe()
		stdin = stdinR
	}
	var resize chan TerminalSize
	if req.TTY {
		resize = make(chan TerminalSize, 1)
	}
	var wg sync.WaitGroup
	pumpCtx, stopPump := context.WithCancel(ctx)
	wg.Add(2)
	go func() { defer wg.Done(); in.pump(pumpCtx, stdinW, resize) }()
	go func() { defer wg.Done(); idle.run(pumpCtx, cancel) }()
	opts := ExecOptions{Cmd: req.Command, TTY: req.TTY, Size: TerminalSize{Width: uint(req.Width), Height: uint(req.Height)}}
	stop := out.flushEvery(execFlushInterval)
	code, err := execer.ExecSession(ctx, c.ID, opts, stdin, activeWriter{out.writer(schema.ExecStdout), idle},
		activeWriter{out.writer(schema.ExecStderr), idle}, resize)
	stop()
	stopPump()
	if stdinR != nil {
		_ = stdinR.CloseWithError(io.ErrClosedPipe) // ends a write the command will never read
	}
	wg.Wait()
	return code, err
}

// setInput registers (in != nil) or forgets session id's input.
func (s *ExecServer) setInput(id string, in *sessionInput) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in == nil {
		delete(s.inputs, id)
		return
	}
	s.inputs[id] = in
}

// unsubscribe leaves a session's input topic; it outlives the session's
// context, which has ended by then.
func (s *ExecServer) unsubscribe(topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.PublishTimeout)
	defer cancel()
	if err := s.opts.Conn.Unsubscribe(ctx, topic); err != nil {
		s.log.Debug("unsubscribe from exec input", "topic", topic, "err", err)
	}
}

// IsInputTopic reports whether topic is one of this node's exec session
// input topics (HandleInput takes them).
func (s *ExecServer) IsInputTopic(topic string) bool {
	node, _, ok := schema.ParseExecInputTopic(topic)
	return ok && node == s.opts.NodeName
}

// HandleInput takes one payload of a session's input topic, as
// Agent.OpenRequest returns it (verified, when the agent pins a trust
// root). It never blocks: the chunk is queued for the session's pump.
// Input of no running session (late, or never asked for) is dropped.
func (s *ExecServer) HandleInput(topic string, payload []byte) {
	node, id, ok := schema.ParseExecInputTopic(topic)
	if !ok || node != s.opts.NodeName {
		return
	}
	m, err := schema.DecodeExecInput(payload)
	if err != nil {
		s.log.Debug("dropping malformed exec input", "topic", topic, "err", err)
		return
	}
	if m.Node != node || m.ID != id {
		s.log.Debug("dropping exec input for another session", "topic", topic, "node", m.Node, "id", m.ID)
		return
	}
	s.mu.Lock()
	in := s.inputs[id]
	s.mu.Unlock()
	if in != nil {
		in.feed(m)
	}
}
