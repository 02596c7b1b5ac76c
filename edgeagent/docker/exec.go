package docker

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
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
	created, err := r.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd:          cmd,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return 0, containerErr("exec in", id, err)
	}
	if err := r.execCopy(ctx, created.ID, stdin, stdout, stderr); err != nil {
		return 0, fmt.Errorf("exec %q in container %s: %w", cmd, id, err)
	}
	code, err := r.execExitCode(ctx, created.ID)
	if err != nil {
		return 0, fmt.Errorf("exec %q in container %s: %w", cmd, id, err)
	}
	return code, nil
}

// execCopy starts the exec, feeds it stdin and copies its demultiplexed
// output until the process closes it or ctx ends.
func (r *Runtime) execCopy(ctx context.Context, execID string, stdin io.Reader, stdout, stderr io.Writer) error {
	att, err := r.cli.ExecAttach(ctx, execID, client.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	if stdin != nil {
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			// A failed write means the process exited or ctx ended: the
			// output copy below sees that too.
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
		defer func() { att.Close(); <-fed }() // the close ends a blocked write
	}
	_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err != nil {
		return fmt.Errorf("read output: %w", err)
	}
	return nil
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
