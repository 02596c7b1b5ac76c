package docker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type sessionResult struct {
	code int
	err  error
}

// startSession runs ExecSession in the background and returns its
// standard input, output buffers and result.
func startSession(ctx context.Context, e env, id string, opts edgeagent.ExecOptions, resize chan edgeagent.TerminalSize) (*io.PipeWriter, *lockedBuffer, *lockedBuffer, chan sessionResult) {
	r, w := io.Pipe()
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan sessionResult, 1)
	go func() {
		code, err := e.rt.ExecSession(ctx, id, opts, r, stdout, stderr, resize)
		done <- sessionResult{code, err}
	}()
	return w, stdout, stderr, done
}

func waitOutput(t *testing.T, b *lockedBuffer, want string) {
	t.Helper()
	checkfor.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(b.String(), want) {
			return fmt.Errorf("output %q has no %q yet", b.String(), want)
		}
		return nil
	})
}

func result(t *testing.T, done chan sessionResult) sessionResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("ExecSession did not return")
		return sessionResult{}
	}
}

// TestExecSessionOnATerminal: on a terminal (docker exec -it) the command
// sees the size it was given and every resize, its stderr comes merged
// into the one output stream, and the session ends with its exit code.
func TestExecSessionOnATerminal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.run(t, e.spec("tty", "sleep"))
	resize := make(chan edgeagent.TerminalSize, 1)
	stdin, stdout, stderr, done := startSession(t.Context(), e, id,
		edgeagent.ExecOptions{Cmd: []string{"/app", "repl"}, TTY: true, Size: edgeagent.TerminalSize{Width: 100, Height: 30}}, resize)
	waitOutput(t, stdout, "app> ")
	_, err := io.WriteString(stdin, "size\n")
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, stdout, "size 100x30")
	resize <- edgeagent.TerminalSize{Width: 120, Height: 40}
	checkfor.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		if _, err := io.WriteString(stdin, "size\n"); err != nil {
			return err
		}
		if !strings.Contains(stdout.String(), "size 120x40") {
			return fmt.Errorf("not resized yet: %q", stdout.String())
		}
		return nil
	})
	if _, err := io.WriteString(stdin, "err to stderr\nexit 3\n"); err != nil {
		t.Fatal(err)
	}
	r := result(t, done)
	if r.err != nil || r.code != 3 {
		t.Fatalf("ExecSession = %d, %v; want 3", r.code, r.err)
	}
	if !strings.Contains(stdout.String(), "to stderr\r\n") || stderr.String() != "" {
		t.Errorf("stderr on a terminal: output %q, stderr %q; want it merged into the output", stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "size\r\n") { // the line typed, as the terminal echoes it
		t.Errorf("the terminal did not echo what was typed: %q", stdout.String())
	}
}

// TestExecSessionStreamsInput: without a terminal, input reaches the
// command as it is written (an answer comes before the input ends), its
// end closes the command's input, and stdout and stderr stay apart. A
// session whose context ends while the command waits for input returns.
func TestExecSessionStreamsInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.run(t, e.spec("stream", "sleep"))
	stdin, stdout, stderr, done := startSession(t.Context(), e, id, edgeagent.ExecOptions{Cmd: []string{"/app", "repl"}}, nil)
	if _, err := io.WriteString(stdin, "first\n"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, stdout, "echo: first\n")
	if _, err := io.WriteString(stdin, "err apart\nsecond\n"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, stdout, "echo: second\n")
	_ = stdin.Close()
	r := result(t, done)
	if r.err != nil || r.code != 0 {
		t.Fatalf("ExecSession = %d, %v; want 0 at the end of input", r.code, r.err)
	}
	if stderr.String() != "apart\n" || strings.Contains(stdout.String(), "apart") {
		t.Errorf("stdout %q, stderr %q: want stderr apart", stdout.String(), stderr.String())
	}

	ctx, cancel := context.WithCancel(t.Context())
	_, stdout, _, done = startSession(ctx, e, id, edgeagent.ExecOptions{Cmd: []string{"/app", "repl"}}, nil)
	waitOutput(t, stdout, "app> ")
	cancel()
	if r := result(t, done); !errors.Is(r.err, context.Canceled) {
		t.Errorf("ExecSession after cancel = %d, %v; want context.Canceled", r.code, r.err)
	}
}
