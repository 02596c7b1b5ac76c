package edgeagent_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
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
