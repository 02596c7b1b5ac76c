package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// localTerminal is edgesetctl's own terminal in an exec -t session: its
// standard input (raw mode) and the file whose size the remote terminal
// takes (standard output when it is a terminal too, as kubectl does).
type localTerminal struct {
	in     *os.File
	sizeOf *os.File
}

// openLocalTerminal returns in as a terminal, or nil when it is not one.
func openLocalTerminal(in io.Reader, out io.Writer) *localTerminal {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	t := &localTerminal{in: f, sizeOf: f}
	if o, ok := out.(*os.File); ok && term.IsTerminal(int(o.Fd())) {
		t.sizeOf = o
	}
	return t
}

// size is the terminal's width and height; 0, 0 when it cannot be read.
func (t *localTerminal) size() (int, int) {
	w, h, err := term.GetSize(int(t.sizeOf.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 0, 0
	}
	return min(w, schema.MaxTerminalSize), min(h, schema.MaxTerminalSize)
}

// raw puts the terminal in raw mode and returns what restores it: the
// caller defers it, so the terminal is restored however the session
// ends (the command's exit, an error, a signal, a panic).
func (t *localTerminal) raw() (restore func(), err error) {
	fd := int(t.in.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = term.Restore(fd, state) }) }, nil
}

// runInteractive runs an interactive session: the output goes to out, and
// once the controller named the session, standard input (and, with a
// terminal, its size) goes to it as it comes.
func runInteractive(ctx context.Context, s *streams, c *api.Client, ds string, req api.ExecRequest, t *localTerminal,
	out func(api.ExecChunk) error) (int, error) {
	if t != nil {
		restore, err := t.raw()
		if err != nil {
			return 0, err
		}
		defer restore()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var in io.Reader
	if req.StdinStream {
		in = s.in
	}
	p := &inputPump{c: c, ds: ds, in: in, term: t}
	var wg sync.WaitGroup
	defer wg.Wait() // after the cancel below: deferred calls run last first
	defer cancel(nil)
	code, err := c.Exec(ctx, ds, req, func(ch api.ExecChunk) error {
		if ch.Session != "" {
			p.session = ch.Session
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.run(ctx); err != nil {
					cancel(err)
				}
			}()
			return nil
		}
		return out(ch)
	})
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause // the input failed first, which ended the session
	}
	return code, err
}

// inputPump sends a session's input: what in yields, in chunks of at most
// schema.MaxExecInputChunkBytes (what came while the previous chunk was
// on its way goes in the next one), its end as eof, and the terminal's
// size whenever it changes (SIGWINCH). One chunk is in flight at a time,
// so the controller's pacing paces the reading too.
type inputPump struct {
	c       *api.Client
	ds      string
	session string
	in      io.Reader // nil without -i
	term    *localTerminal

	seq int
}

// inputEvent is what the pump sends next: data read, and whether the
// input ended after it.
type inputEvent struct {
	data []byte
	eof  bool
}

// run pumps until ctx ends; an error is a chunk the controller refused.
func (p *inputPump) run(ctx context.Context) error {
	reads := make(chan inputEvent)
	done := make(chan struct{})
	defer close(done)
	if p.in != nil {
		// The read of a terminal cannot be interrupted: this goroutine
		// may stay blocked in it after the session, until edgesetctl
		// exits; it sends nothing more once run has returned.
		go readInput(p.in, reads, done)
	}
	var resized chan os.Signal
	if p.term != nil {
		resized = make(chan os.Signal, 1)
		notifyResize(resized)
		defer signal.Stop(resized)
	}
	var carry *inputEvent // read, but too much for the last chunk
	for {
		var ev inputEvent
		var resize *schema.TerminalSize
		if carry != nil {
			ev, carry = *carry, nil
			ev, carry = gather(ev, reads)
		} else {
			select {
			case <-ctx.Done():
				return nil
			case ev = <-reads:
				ev, carry = gather(ev, reads)
			case <-resized:
				w, h := p.term.size()
				if w == 0 {
					continue
				}
				resize = &schema.TerminalSize{Width: w, Height: h}
			}
		}
		if err := p.send(ctx, api.ExecInput{Data: ev.data, EOF: ev.eof, Resize: resize}); err != nil {
			return err
		}
		if ev.eof {
			reads = nil // nothing more comes; resizes still do
		}
	}
}

// readInput reads in into events until its end or an error, both sent
// as eof, or until done is closed.
func readInput(in io.Reader, events chan<- inputEvent, done <-chan struct{}) {
	for {
		buf := make([]byte, schema.MaxExecInputChunkBytes)
		n, err := in.Read(buf)
		ev := inputEvent{data: buf[:n], eof: err != nil}
		if n == 0 && !ev.eof {
			continue
		}
		select {
		case events <- ev:
		case <-done:
			return
		}
		if ev.eof {
			return
		}
	}
}

// gather adds to ev what else is read already, up to one chunk; what
// would not fit is returned as carry, for the next chunk.
func gather(ev inputEvent, events chan inputEvent) (inputEvent, *inputEvent) {
	for !ev.eof && len(ev.data) < schema.MaxExecInputChunkBytes {
		select {
		case more := <-events:
			if len(ev.data)+len(more.data) > schema.MaxExecInputChunkBytes {
				return ev, &more
			}
			ev.data = append(ev.data, more.data...)
			ev.eof = more.eof
		default:
			return ev, nil
		}
	}
	return ev, nil
}

// inputRetries and inputRetryDelay bound the resends of a chunk whose
// answer was lost or that the controller could not pass on; a resend of
// a chunk that went through is a no-op (its seq).
const (
	inputRetries    = 5
	inputRetryDelay = 200 * time.Millisecond
)

// send sends one chunk with the next seq, resending it while the failure
// may pass.
func (p *inputPump) send(ctx context.Context, in api.ExecInput) error {
	in.Seq = p.seq
	var err error
	for attempt := 0; attempt < inputRetries; attempt++ {
		if err = p.c.ExecInput(ctx, p.ds, p.session, in); err == nil {
			p.seq++
			return nil
		}
		if ctx.Err() != nil || !retryable(err) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(inputRetryDelay << attempt):
		}
	}
	if ctx.Err() != nil {
		return nil // the session ended meanwhile
	}
	return fmt.Errorf("send input: %w", err)
}

// retryable reports whether a failed request may succeed if sent again:
// no answer, or a 5xx (503: the node could not be reached for now).
func retryable(err error) bool {
	var se *api.StatusError
	if errors.As(err, &se) {
		return se.Code >= 500
	}
	return !errors.Is(err, api.ErrUnauthorized)
}
