package docker

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/edgeset/edgeset/edgeagent"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Logs returns the container's stdout and stderr merged as plain text: the
// last tail lines (all if tail <= 0), then, if follow, new lines until the
// container stops, ctx ends or the reader is closed. The caller must Close
// the reader. lo.Until ends the log at that instant, to the nanosecond of
// the engine's line timestamps. The engine stamps a line when it reads it,
// and records a run's StartedAt only once the process runs, so a process
// that prints at once may log before its own StartedAt: the previous run of
// a restarted container ends at its FinishedAt more surely than at the
// current run's StartedAt.
func (r *Runtime) Logs(ctx context.Context, id string, lo edgeagent.LogOptions) (io.ReadCloser, error) {
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: lo.Follow, Tail: "all"}
	if lo.Tail > 0 {
		opts.Tail = strconv.Itoa(lo.Tail)
	}
	if !lo.Until.IsZero() {
		opts.Until = lo.Until.UTC().Format(time.RFC3339Nano)
	}
	if !lo.Since.IsZero() {
		opts.Since = lo.Since.UTC().Format(time.RFC3339Nano)
	}
	src, err := r.cli.ContainerLogs(ctx, id, opts)
	if err != nil {
		return nil, containerErr("logs of", id, err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, pw, src)
		pw.CloseWithError(err)
	}()
	return &logReader{PipeReader: pr, src: src}, nil
}

// logReader is the demultiplexed side of a log stream; closing it closes
// the engine's stream, which ends the copying goroutine.
type logReader struct {
	*io.PipeReader
	src io.Closer
}

// Close closes the engine stream and the pipe.
func (l *logReader) Close() error {
	err := l.src.Close()
	_ = l.PipeReader.Close()
	return err
}
