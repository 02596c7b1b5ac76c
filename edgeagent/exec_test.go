package edgeagent_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// scriptedExecer answers ExecStream by writing out to stdout and err to
// stderr, or blocking until ctx ends when block is set.
type scriptedExecer struct {
	out, errOut string
	code        int
	block       bool
	piece       int // bytes per write; 7 when zero
	gotStdin    chan string
}

func (e *scriptedExecer) ExecStream(ctx context.Context, _ string, _ []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if stdin != nil && e.gotStdin != nil {
		b, _ := io.ReadAll(stdin)
		e.gotStdin <- string(b)
	}
	if e.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	// Written in pieces, as an engine's frames come.
	for s := e.out; s != ""; {
		n := min(len(s), cmp.Or(e.piece, 7))
		_, _ = stdout.Write([]byte(s[:n]))
		s = s[n:]
	}
	_, _ = stderr.Write([]byte(e.errOut))
	return e.code, nil
}

func startExecServer(t *testing.T, opts edgeagent.ExecServerOptions) (*edgeagent.ExecServer, *fakeConn) {
	t.Helper()
	conn := newFakeConn()
	opts.NodeName, opts.Conn = testNode, conn
	if opts.Runtime == nil {
		opts.Runtime = logRuntime(t, 0)
	}
	s := edgeagent.NewExecServer(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return s, conn
}

func execRequest(t *testing.T, r schema.ExecRequest) []byte {
	t.Helper()
	r.SchemaVersion, r.Node = schema.WireVersion, testNode
	if r.DaemonSet == "" && !r.Cancel {
		r.DaemonSet = "edge/agent"
	}
	if r.Command == nil && !r.Cancel {
		r.Command = []string{"/bin/true"}
	}
	b, err := schema.Encode(r)
	require.NoError(t, err)
	return b
}

// session waits for session id's last chunk and returns its stdout,
// stderr and last chunk.
func session(t *testing.T, conn *fakeConn, id string) (stdout, stderr string, last schema.ExecChunk) {
	t.Helper()
	var got []schema.ExecChunk
	checkfor.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		got = got[:0]
		for _, p := range conn.published(schema.NodeTopic(testNode, schema.TopicExecResponse)) {
			c, err := schema.DecodeExecChunk(p.payload)
			require.NoError(t, err, "the agent published an invalid chunk")
			require.False(t, p.retained)
			if c.ID == id {
				got = append(got, c)
			}
		}
		if len(got) == 0 || !got[len(got)-1].EOF {
			return fmt.Errorf("session %s not finished: %d chunks", id, len(got))
		}
		return nil
	})
	var out, errOut strings.Builder
	for i, c := range got {
		require.Equal(t, i, c.Seq)
		if c.Stream == schema.ExecStderr {
			errOut.WriteString(c.Data)
		} else {
			out.WriteString(c.Data)
		}
	}
	return out.String(), errOut.String(), got[len(got)-1]
}

func TestExecServerRunsWhenAllowed(t *testing.T) {
	ex := &scriptedExecer{out: "hello from the container\n", errOut: "warning\n", code: 3, gotStdin: make(chan string, 1)}
	s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: ex, Allow: true})
	s.Handle(execRequest(t, schema.ExecRequest{ID: "x1", Stdin: "input\n"}))
	stdout, stderr, last := session(t, conn, "x1")
	assert.Equal(t, "hello from the container\n", stdout)
	assert.Equal(t, "warning\n", stderr)
	require.NotNil(t, last.ExitCode)
	assert.Equal(t, 3, *last.ExitCode)
	assert.Empty(t, last.Error)
	assert.Equal(t, "input\n", <-ex.gotStdin)
}

func TestExecServerRefusals(t *testing.T) {
	t.Run("local policy", func(t *testing.T) {
		ex := &scriptedExecer{out: "must not run"}
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: ex, Allow: false})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "x1"}))
		stdout, _, last := session(t, conn, "x1")
		assert.Empty(t, stdout)
		assert.Nil(t, last.ExitCode)
		assert.Contains(t, last.Error, "allow-exec")
	})
	t.Run("unknown daemonset and container", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: &scriptedExecer{}, Allow: true})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "x1", DaemonSet: "edge/other"}))
		_, _, last := session(t, conn, "x1")
		assert.Contains(t, last.Error, "no instance of daemonset edge/other")
		s.Handle(execRequest(t, schema.ExecRequest{ID: "x2", Container: "nope"}))
		_, _, last = session(t, conn, "x2")
		assert.Contains(t, last.Error, `has no container "nope"`)
	})
	t.Run("too many sessions, timeout and cancel", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: &scriptedExecer{block: true}, Allow: true, MaxSessions: 1})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "long", TimeoutSeconds: 1}))
		s.Handle(execRequest(t, schema.ExecRequest{ID: "second"})) // Handle took "long"'s slot before it returned
		_, _, last := session(t, conn, "second")
		assert.Contains(t, last.Error, "too many exec sessions")
		_, _, last = session(t, conn, "long")
		assert.Contains(t, last.Error, "timed out after 1s")

		s.Handle(execRequest(t, schema.ExecRequest{ID: "cancelled", TimeoutSeconds: 600}))
		s.Handle(execRequest(t, schema.ExecRequest{ID: "cancelled", Cancel: true}))
		_, _, last = session(t, conn, "cancelled")
		assert.Equal(t, "exec cancelled", last.Error)
	})
	t.Run("another node's request", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: &scriptedExecer{}, Allow: true})
		r := schema.ExecRequest{SchemaVersion: schema.WireVersion, Node: "gw-other", ID: "x1", DaemonSet: "edge/agent", Command: []string{"id"}}
		b, err := schema.Encode(r)
		require.NoError(t, err)
		s.Handle(b)
		s.Handle([]byte(`{"schemaVersion":1,"node":"` + testNode + `","id":"bad id!"}`))
		time.Sleep(50 * time.Millisecond)
		assert.Empty(t, conn.published(schema.NodeTopic(testNode, schema.TopicExecResponse)), "nothing runs, nothing answers")
	})
}

// TestExecServerBoundsOutput: output is cut into chunks that keep runes
// whole, and output past the limit is dropped and said so.
func TestExecServerBoundsOutput(t *testing.T) {
	big := strings.Repeat("é", schema.MaxExecOutputBytes/2+1000) // two bytes a rune
	s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: &scriptedExecer{out: big, piece: 4093}, Allow: true})
	s.Handle(execRequest(t, schema.ExecRequest{ID: "big"}))
	stdout, _, last := session(t, conn, "big")
	assert.True(t, last.Truncated)
	assert.Equal(t, schema.MaxExecOutputBytes, len(stdout))
	assert.Equal(t, strings.Repeat("é", schema.MaxExecOutputBytes/2), stdout, "no rune is split or replaced")
}

// replExecer answers ExecSession as a tiny shell would on its terminal:
// each line of input is answered "> LINE", "exit N" ends it with N, the
// end of its input with 0; it records the terminal sizes it is given.
// With deaf it never reads its input.
type replExecer struct {
	scriptedExecer
	deaf  bool
	opts  chan edgeagent.ExecOptions
	sizes chan edgeagent.TerminalSize
}

func newReplExecer() *replExecer {
	return &replExecer{opts: make(chan edgeagent.ExecOptions, 1), sizes: make(chan edgeagent.TerminalSize, 16)}
}

func (e *replExecer) ExecSession(ctx context.Context, _ string, opts edgeagent.ExecOptions, stdin io.ReadCloser, stdout, _ io.Writer, resize <-chan edgeagent.TerminalSize) (int, error) {
	e.opts <- opts
	lines := make(chan string)
	done := make(chan struct{})
	defer close(done)
	if stdin != nil && !e.deaf {
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdin)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-done:
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case size := <-resize:
			e.sizes <- size
		case line, ok := <-lines:
			if !ok {
				return 0, nil
			}
			if code, found := strings.CutPrefix(line, "exit "); found {
				n, _ := strconv.Atoi(code)
				return n, nil
			}
			fmt.Fprintf(stdout, "> %s\n", line)
		}
	}
}

// input is the payload of chunk seq of session id's input.
func input(t *testing.T, id string, seq int, data string, edit ...func(*schema.ExecInput)) []byte {
	t.Helper()
	m := schema.ExecInput{SchemaVersion: schema.WireVersion, Node: testNode, ID: id, Seq: seq, Data: []byte(data)}
	for _, e := range edit {
		e(&m)
	}
	b, err := schema.Encode(m)
	require.NoError(t, err)
	return b
}

// waitReady waits until session id said it takes input.
func waitReady(t *testing.T, conn *fakeConn, id string) {
	t.Helper()
	checkfor.Eventually(t, 30*time.Second, 10*time.Millisecond, func() error {
		for _, p := range conn.published(schema.NodeTopic(testNode, schema.TopicExecResponse)) {
			if c, err := schema.DecodeExecChunk(p.payload); err == nil && c.ID == id && c.Ready {
				if !conn.subscribed(schema.ExecInputTopic(testNode, id)) {
					return fmt.Errorf("ready before subscribing to its input")
				}
				return nil
			}
		}
		return fmt.Errorf("session %s not ready", id)
	})
}

// TestExecServerInteractive: an interactive session subscribes to its own
// input topic and says so, then feeds the command its input in order
// (chunks out of order are put back, repeated ones dropped), resizes its
// terminal, and ends with the command's exit code; it then leaves the
// topic. Input on another node's topic, or of no session, changes nothing.
func TestExecServerInteractive(t *testing.T) {
	ex := newReplExecer()
	s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: ex, Allow: true})
	s.Handle(execRequest(t, schema.ExecRequest{ID: "it", Command: []string{"sh"}, StdinStream: true, TTY: true, Width: 100, Height: 30}))
	waitReady(t, conn, "it")
	assert.Equal(t, edgeagent.ExecOptions{Cmd: []string{"sh"}, TTY: true, Size: edgeagent.TerminalSize{Width: 100, Height: 30}}, <-ex.opts)

	topic := schema.ExecInputTopic(testNode, "it")
	assert.True(t, s.IsInputTopic(topic))
	assert.False(t, s.IsInputTopic(schema.ExecInputTopic("gw-other", "it")))
	s.HandleInput(schema.ExecInputTopic("gw-other", "it"), input(t, "it", 0, "other node\n"))
	s.HandleInput(topic, input(t, "it", 1, "two\n"))
	s.HandleInput(topic, input(t, "it", 0, "one\n"))
	s.HandleInput(topic, input(t, "it", 0, "one again\n")) // a redelivery
	s.HandleInput(topic, input(t, "it", 2, "", func(m *schema.ExecInput) { m.Resize = &schema.TerminalSize{Width: 120, Height: 40} }))
	s.HandleInput(schema.ExecInputTopic(testNode, "nobody"), input(t, "nobody", 0, "lost\n"))
	s.HandleInput(topic, []byte(`{"schemaVersion":1,"node":"`+testNode+`","id":"it","seq":3}`)) // malformed: no data
	assert.Equal(t, edgeagent.TerminalSize{Width: 120, Height: 40}, <-ex.sizes)
	s.HandleInput(topic, input(t, "it", 3, "exit 4\n"))

	stdout, stderr, last := session(t, conn, "it")
	assert.Equal(t, "> one\n> two\n", stdout)
	assert.Empty(t, stderr)
	require.NotNil(t, last.ExitCode, "ended by %q", last.Error)
	assert.Equal(t, 4, *last.ExitCode)
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if conn.subscribed(topic) {
			return fmt.Errorf("still subscribed to %s", topic)
		}
		return nil
	})
}

// TestExecServerInteractiveEnds: an interactive session ends when its
// input ends (eof), when it idles, when a chunk of its input is lost, and
// when the command does not read what it is sent; each says why.
func TestExecServerInteractiveEnds(t *testing.T) {
	t.Run("end of input", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: newReplExecer(), Allow: true})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "eof", StdinStream: true}))
		waitReady(t, conn, "eof")
		s.HandleInput(schema.ExecInputTopic(testNode, "eof"), input(t, "eof", 0, "bye\n", func(m *schema.ExecInput) { m.EOF = true }))
		stdout, _, last := session(t, conn, "eof")
		assert.Equal(t, "> bye\n", stdout)
		require.NotNil(t, last.ExitCode, "ended by %q", last.Error)
		assert.Equal(t, 0, *last.ExitCode)
	})
	t.Run("idle", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: newReplExecer(), Allow: true})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "idle", StdinStream: true, IdleTimeoutSeconds: 1}))
		_, _, last := session(t, conn, "idle")
		assert.Nil(t, last.ExitCode)
		assert.Contains(t, last.Error, "exec idle for 1s")
	})
	t.Run("input lost", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: newReplExecer(), Allow: true})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "lost", StdinStream: true}))
		waitReady(t, conn, "lost")
		for seq := 1; seq <= schema.MaxExecInputPending+1; seq++ { // chunk 0 never comes
			s.HandleInput(schema.ExecInputTopic(testNode, "lost"), input(t, "lost", seq, "x\n"))
		}
		stdout, _, last := session(t, conn, "lost")
		assert.Empty(t, stdout, "nothing after the hole reached the command")
		assert.Contains(t, last.Error, "exec input lost: chunk 0 did not come")
	})
	t.Run("command not reading", func(t *testing.T) {
		ex := newReplExecer()
		ex.deaf = true
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: ex, Allow: true})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "deaf", StdinStream: true}))
		waitReady(t, conn, "deaf")
		for seq := range 2*schema.MaxExecInputPending + 2 {
			s.HandleInput(schema.ExecInputTopic(testNode, "deaf"), input(t, "deaf", seq, "x\n"))
		}
		_, _, last := session(t, conn, "deaf")
		assert.Contains(t, last.Error, "exec input overflow")
	})
	t.Run("local policy", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: newReplExecer(), Allow: false})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "denied", StdinStream: true, TTY: true}))
		_, _, last := session(t, conn, "denied")
		assert.Contains(t, last.Error, "allow-exec")
		assert.Zero(t, conn.subscriptions(schema.ExecInputTopic(testNode, "denied")), "a refused session reads no input")
	})
	t.Run("runtime without sessions", func(t *testing.T) {
		s, conn := startExecServer(t, edgeagent.ExecServerOptions{Execer: &scriptedExecer{}, Allow: true})
		s.Handle(execRequest(t, schema.ExecRequest{ID: "old", TTY: true}))
		_, _, last := session(t, conn, "old")
		assert.Contains(t, last.Error, "cannot run interactive exec sessions")
	})
}
