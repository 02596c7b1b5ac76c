package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// DefaultExecSessions bounds the exec sessions an agent runs at once.
const DefaultExecSessions = 2

// Execer runs a command in a running container, streaming its output:
// what ExecServer needs of the runtime beyond Runtime (edgeagent/docker
// and edgeagent/fake implement it).
type Execer interface {
	ExecStream(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error)
}

// ExecServerOptions configure an ExecServer.
type ExecServerOptions struct {
	// NodeName is this node; requests naming another node are ignored.
	NodeName string
	// Runtime finds the container, Execer runs the command in it; Conn
	// publishes the output.
	Runtime Runtime
	Execer  Execer
	Conn    Conn
	// Allow is the device's local policy (agent allow-exec): when false,
	// every request is answered with an error and nothing runs.
	Allow  bool
	Logger *slog.Logger
	// MaxSessions bounds concurrent sessions; default DefaultExecSessions.
	MaxSessions int
	// PublishTimeout bounds each chunk's publish; default 10 s.
	PublishTimeout time.Duration
}

// ExecServer answers a node's exec requests (schema.ExecRequest on its
// exec/request topic) with schema.ExecChunk messages on its exec/response
// topic. Handle never blocks; each session runs in its own goroutine,
// ended by its timeout, a cancel or Run's end, and joined by Run.
type ExecServer struct {
	opts ExecServerOptions
	log  *slog.Logger
	wg   sync.WaitGroup

	mu       sync.Mutex                         // guards closed, sessions and inputs
	closed   bool                               // Run returned: no new sessions
	sessions map[string]context.CancelCauseFunc // running sessions by request ID
	inputs   map[string]*sessionInput           // the interactive ones' input, by request ID
	base     context.Context                    // parent of every session
	stop     context.CancelFunc                 // cancels base when Run ends
}

// errCancelled ends a session the controller cancelled.
var errCancelled = errors.New("exec cancelled")

// NewExecServer returns an ExecServer; Run must be called to end the
// sessions and wait for them.
func NewExecServer(opts ExecServerOptions) *ExecServer {
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultExecSessions
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, stop := context.WithCancel(context.Background())
	return &ExecServer{opts: opts, log: log, sessions: map[string]context.CancelCauseFunc{}, inputs: map[string]*sessionInput{},
		base: base, stop: stop}
}

// Topic is the request topic to subscribe to.
func (s *ExecServer) Topic() string {
	return schema.NodeTopic(s.opts.NodeName, schema.TopicExecRequest)
}

// Run serves until ctx ends, then cancels every session and waits for them.
func (s *ExecServer) Run(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	s.closed = true
	s.stop()
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Handle takes one exec/request payload, as Agent.OpenRequest returns it
// (verified, when the agent pins a trust root).
func (s *ExecServer) Handle(payload []byte) {
	req, err := schema.DecodeExecRequest(payload)
	if err != nil {
		s.log.Warn("dropping malformed exec request", "err", err)
		return
	}
	if req.Node != s.opts.NodeName {
		s.log.Warn("dropping exec request for another node", "node", req.Node)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if cancel, ok := s.sessions[req.ID]; ok {
		if req.Cancel {
			cancel(errCancelled)
		}
		return // a cancel, or a redelivered request
	}
	if req.Cancel {
		return
	}
	refusal := ""
	switch {
	case !s.opts.Allow:
		refusal = fmt.Sprintf("exec is disabled on node %s by its local policy (agent allow-exec: false)", s.opts.NodeName)
	case s.opts.Execer == nil:
		refusal = fmt.Sprintf("the runtime of node %s cannot exec", s.opts.NodeName)
	case len(s.sessions) >= s.opts.MaxSessions:
		refusal = fmt.Sprintf("too many exec sessions on node %s (limit %d); try again later", s.opts.NodeName, s.opts.MaxSessions)
	}
	timeout := time.Duration(req.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = schema.DefaultExecTimeoutSeconds * time.Second
	}
	withCause, cancel := context.WithCancelCause(s.base)
	ctx, stopTimer := context.WithTimeout(withCause, timeout)
	if refusal == "" {
		s.sessions[req.ID] = cancel
		s.log.Info("exec", "id", req.ID, "daemonset", req.DaemonSet, "container", req.Container, "command", req.Command,
			"tty", req.TTY, "stdin", req.StdinStream, "requester", req.Requester)
	} else {
		s.log.Warn("exec refused", "id", req.ID, "requester", req.Requester, "reason", refusal)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.end(req.ID, cancel, stopTimer)
		if refusal != "" {
			newExecSession(s, req.ID).finish(ctx, nil, refusal)
			return
		}
		s.run(ctx, cancel, req, timeout)
	}()
}

func (s *ExecServer) end(id string, cancel context.CancelCauseFunc, stopTimer context.CancelFunc) {
	stopTimer()
	cancel(nil)
	s.mu.Lock()
	delete(s.sessions, id)
	s.mu.Unlock()
}

// run runs one session: it finds the container and runs the command in
// it, streaming the output, and ends with the exit code or an error.
// cancel ends ctx with a cause (a cancel request; for an interactive
// session also idleness or its input's failure).
func (s *ExecServer) run(ctx context.Context, cancel context.CancelCauseFunc, req schema.ExecRequest, timeout time.Duration) {
	out := newExecSession(s, req.ID)
	c, err := findContainer(ctx, s.opts.Runtime, s.opts.NodeName, req.DaemonSet, req.Container)
	if err == nil && !c.Running {
		err = fmt.Errorf("container %s of daemonset %s is not running", c.Labels[LabelContainer], req.DaemonSet)
	}
	code := 0
	switch {
	case err != nil:
	case req.Interactive():
		code, err = s.interactive(ctx, cancel, req, c, out)
	default:
		var stdin io.Reader
		if req.Stdin != "" {
			stdin = strings.NewReader(req.Stdin)
		}
		stop := out.flushEvery(execFlushInterval)
		code, err = s.opts.Execer.ExecStream(ctx, c.ID, req.Command, stdin, out.writer(schema.ExecStdout), out.writer(schema.ExecStderr))
		stop()
	}
	cause := context.Cause(ctx)
	switch {
	case s.base.Err() != nil:
		out.finish(ctx, nil, errCancelled.Error())
	case errors.Is(cause, errIdle) || errors.Is(cause, errInputLost) || errors.Is(cause, errInputOverflow):
		out.finish(ctx, nil, cause.Error()+" (the process may still run in the container)")
	case errors.Is(ctx.Err(), context.Canceled):
		out.finish(ctx, nil, errCancelled.Error())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.finish(ctx, nil, fmt.Sprintf("exec timed out after %s (the process may still run in the container)", timeout))
	case err != nil:
		out.finish(ctx, nil, err.Error())
	default:
		out.finish(ctx, &code, "")
	}
}

// execFlushInterval is how long output waits to fill a chunk before it is
// sent anyway: a chatty command's lines travel together, a quiet one's
// still arrive at once.
const execFlushInterval = 100 * time.Millisecond

// execSession publishes one session's output in order, in chunks of at
// most schema.MaxExecChunkBytes that keep runes whole, and at most
// schema.MaxExecOutputBytes of it. Its writers may be called from several
// goroutines.
type execSession struct {
	s  *ExecServer
	id string

	mu        sync.Mutex // guards the fields below and serialises publishes
	seq       int
	accepted  int               // output bytes taken, of MaxExecOutputBytes
	truncated bool              // output past the limit was dropped
	buf       map[string][]byte // output not yet sent, per stream
	failed    error             // the first failed publish: later output is dropped
}

func newExecSession(s *ExecServer, id string) *execSession {
	return &execSession{s: s, id: id, buf: map[string][]byte{}}
}

type streamWriter struct {
	x      *execSession
	stream string
}

func (x *execSession) writer(stream string) io.Writer { return streamWriter{x, stream} }

// Write takes p for the stream, sending every full chunk at once; it
// never fails, so that the command's output is drained whatever happens
// to the link.
func (w streamWriter) Write(p []byte) (int, error) {
	x := w.x
	x.mu.Lock()
	defer x.mu.Unlock()
	take := p
	if room := schema.MaxExecOutputBytes - x.accepted; len(take) > room {
		take, x.truncated = take[:room], true
	}
	x.accepted += len(take)
	x.buf[w.stream] = append(x.buf[w.stream], take...)
	for len(x.buf[w.stream]) >= schema.MaxExecChunkBytes {
		x.sendLocked(w.stream, schema.MaxExecChunkBytes, false)
	}
	return len(p), nil
}

// sendLocked publishes up to n bytes of the stream's buffer, less an
// incomplete rune at the end unless final.
func (x *execSession) sendLocked(stream string, n int, final bool) {
	b := x.buf[stream]
	n = min(n, len(b))
	part, _ := completeRunes(b[:n], final && n == len(b))
	if len(part) == 0 {
		return // the start of a rune whose rest is to come
	}
	if x.failed == nil {
		x.failed = x.publishLocked(x.s.base, schema.ExecChunk{Stream: stream, Data: strings.ToValidUTF8(string(part), "\uFFFD")})
	}
	x.buf[stream] = append(b[:0], b[len(part):]...)
}

// flushEvery sends what waits in the buffers every interval until the
// returned stop is called; stop joins the flusher.
func (x *execSession) flushEvery(interval time.Duration) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			x.mu.Lock()
			for _, stream := range []string{schema.ExecStdout, schema.ExecStderr} {
				x.sendLocked(stream, len(x.buf[stream]), false)
			}
			x.mu.Unlock()
		}
	}()
	return func() { close(done); <-stopped }
}

// finish publishes what remains of each stream, then the last chunk with
// the exit code or errMsg. It outlives ctx's end so that a session cut by
// its timeout still ends cleanly.
func (x *execSession) finish(ctx context.Context, code *int, errMsg string) {
	ctx = context.WithoutCancel(ctx)
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, stream := range []string{schema.ExecStdout, schema.ExecStderr} {
		for len(x.buf[stream]) > 0 {
			x.sendLocked(stream, schema.MaxExecChunkBytes, true)
		}
	}
	if err := x.publishLocked(ctx, schema.ExecChunk{EOF: true, ExitCode: code, Error: errMsg, Truncated: x.truncated}); err != nil {
		x.s.log.Debug("publish last exec chunk", "id", x.id, "err", err)
	}
}

// ready publishes an interactive session's first chunk, saying it takes
// input now.
func (x *execSession) ready(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.publishLocked(ctx, schema.ExecChunk{Ready: true})
}

func (x *execSession) publishLocked(ctx context.Context, c schema.ExecChunk) error {
	c.SchemaVersion, c.Node, c.ID, c.Seq = schema.WireVersion, x.s.opts.NodeName, x.id, x.seq
	x.seq++
	payload, err := schema.Encode(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, x.s.opts.PublishTimeout)
	defer cancel()
	return x.s.opts.Conn.Publish(ctx, schema.NodeTopic(x.s.opts.NodeName, schema.TopicExecResponse), payload, false)
}
