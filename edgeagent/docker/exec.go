package docker

import (
	"context"
	"fmt"
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
	created, err := r.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd:          cmd,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return 0, nil, containerErr("exec in", id, err)
	}
	out, err := r.execOutput(ctx, created.ID)
	if err != nil {
		return 0, out, fmt.Errorf("exec %q in container %s: %w", cmd, id, err)
	}
	code, err := r.execExitCode(ctx, created.ID)
	if err != nil {
		return 0, out, fmt.Errorf("exec %q in container %s: %w", cmd, id, err)
	}
	return code, out, nil
}

// execOutput starts the exec and collects its demultiplexed output until
// the process closes it or ctx ends.
func (r *Runtime) execOutput(ctx context.Context, execID string) ([]byte, error) {
	att, err := r.cli.ExecAttach(ctx, execID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	out := &cappedBuffer{max: maxExecOutput}
	_, err = stdcopy.StdCopy(out, out, att.Reader)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return out.buf, ctxErr
	}
	if err != nil {
		return out.buf, fmt.Errorf("read output: %w", err)
	}
	return out.buf, nil
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
