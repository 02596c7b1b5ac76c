package docker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

const (
	// maxExecOutput caps the output Exec returns.
	maxExecOutput = 4 << 10
	// execExitPoll is the interval at which Exec re-inspects an exec whose
	// output ended before the engine recorded its exit.
	execExitPoll = 10 * time.Millisecond
)

// Exec runs cmd in the running container id and returns its exit code and
// combined stdout and stderr, truncated to 4 KiB (the rest is read and
// dropped). When ctx ends the output stream is closed and ctx's error
// returned; the process itself runs on in the container.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	out := &cappedBuffer{max: maxExecOutput}
	code, err := r.ExecStream(ctx, id, cmd, nil, out, out)
	return code, out.buf, err
}

// ExecStream runs cmd in the running container id with stdin (nil for
// none; closed after it) and copies its stdout and stderr to the writers
// as the engine sends them, then returns its exit code. When ctx ends the
// streams are closed and ctx's error returned; the engine has no way to
// end an exec, so the process itself runs on in the container.
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var rc io.ReadCloser
	if stdin != nil {
		rc = io.NopCloser(stdin)
	}
	return r.ExecSession(ctx, id, edgeagent.ExecOptions{Cmd: cmd}, rc, stdout, stderr, nil)
}

var _ edgeagent.SessionExecer = (*Runtime)(nil)

// ExecSession implements edgeagent.SessionExecer: an exec with
// AttachStdin when stdin is set, on a terminal (Tty, the engine's exec
// resize for each size on resize) when opts.TTY is, as docker exec -it
// runs one. With a terminal the output is raw, one stream, to stdout;
// without, the engine's multiplexed stdout and stderr. When ctx ends the
// streams are closed and ctx's error returned; the engine has no way to
// end an exec, so the process itself runs on in the container (a shell on
// a terminal gets a hang-up when the terminal's last reader goes).
func (r *Runtime) ExecSession(ctx context.Context, id string, opts edgeagent.ExecOptions, stdin io.ReadCloser, stdout, stderr io.Writer, resize <-chan edgeagent.TerminalSize) (int, error) {
	size := client.ConsoleSize{}
	if opts.TTY {
		size = client.ConsoleSize{Height: opts.Size.Height, Width: opts.Size.Width}
	}
	created, err := r.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd:          opts.Cmd,
		TTY:          opts.TTY,
		ConsoleSize:  size,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return 0, containerErr("exec in", id, err)
	}
	if err := r.execCopy(ctx, created.ID, opts.TTY, size, stdin, stdout, stderr, resize); err != nil {
		return 0, fmt.Errorf("exec %q in container %s: %w", opts.Cmd, id, err)
	}
	code, err := r.execExitCode(ctx, created.ID)
	if err != nil {
		return 0, fmt.Errorf("exec %q in container %s: %w", opts.Cmd, id, err)
	}
	return code, nil
}

// execCopy starts the exec, feeds it stdin, resizes its terminal and
// copies its output until the process closes it or ctx ends; then it
// closes stdin and joins its helpers.
func (r *Runtime) execCopy(ctx context.Context, execID string, tty bool, size client.ConsoleSize, stdin io.ReadCloser,
	stdout, stderr io.Writer, resize <-chan edgeagent.TerminalSize) error {
	att, err := r.cli.ExecAttach(ctx, execID, client.ExecAttachOptions{TTY: tty, ConsoleSize: size})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	if stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A failed write means the process exited or ctx ended: the
			// output copy below sees that too.
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
		defer func() { _ = stdin.Close(); att.Close() }() // ends a blocked read or write
	}
	if tty && (size.Width > 0 || size.Height > 0) {
		// Engines before API 1.42 ignore the console size of the create
		// and start calls: size the terminal as docker exec does.
		_, _ = r.cli.ExecResize(ctx, execID, client.ExecResizeOptions(size))
	}
	if resize != nil {
		done := make(chan struct{})
		defer close(done)
		wg.Add(1)
		go func() { defer wg.Done(); r.resizeExec(ctx, execID, resize, done) }()
	}
	if tty {
		_, err = io.Copy(stdout, att.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err != nil {
		return fmt.Errorf("read output: %w", err)
	}
	return nil
}

// resizeExec resizes the exec's terminal to each size received until
// done is closed or ctx ends. A failed resize (the process just ended) is
// not fatal: the session goes on at the old size.
func (r *Runtime) resizeExec(ctx context.Context, execID string, resize <-chan edgeagent.TerminalSize, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case size := <-resize:
			_, _ = r.cli.ExecResize(ctx, execID, client.ExecResizeOptions{Height: size.Height, Width: size.Width})
		}
	}
}

// execExitCode returns the exit code of a finished exec, waiting for the
// engine to record it.
func (r *Runtime) execExitCode(ctx context.Context, execID string) (int, error) {
	for {
		res, err := r.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("inspect: %w", err)
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(execExitPoll):
		}
	}
}

// cappedBuffer keeps the first max bytes written to it and discards the
// rest, never failing a write.
type cappedBuffer struct {
	buf []byte
	max int
}

// Write implements io.Writer.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
