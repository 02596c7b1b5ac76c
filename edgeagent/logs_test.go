package edgeagent_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// logRuntime returns a fake engine with one running daemon edge/agent (two
// containers, main and sidecar) whose log is "<container> line N".
func logRuntime(t *testing.T, lines int) *fake.Runtime {
	t.Helper()
	rt := fake.New()
	rt.AddImage("img")
	rt.LogOutput = func(c edgeagent.ContainerState, opts edgeagent.LogOptions) (io.ReadCloser, error) {
		tail := opts.Tail
		var b strings.Builder
		start := 0
		if tail > 0 {
			start = max(0, lines-tail)
		}
		for i := start; i < lines; i++ {
			fmt.Fprintf(&b, "%s line %d\n", c.Labels[edgeagent.LabelContainer], i)
		}
		return io.NopCloser(strings.NewReader(b.String())), nil
	}
	ctx := context.Background()
	for i, name := range []string{"main", "sidecar"} {
		id, err := rt.Create(ctx, edgeagent.ContainerSpec{Name: "agent-" + name, Image: "img", Labels: map[string]string{
			edgeagent.LabelManaged: "true", edgeagent.LabelNode: testNode, edgeagent.LabelDaemonSet: "edge/agent",
			edgeagent.LabelContainer: name, edgeagent.LabelIndex: fmt.Sprint(i),
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

func startLogServer(t *testing.T, opts edgeagent.LogServerOptions) (*edgeagent.LogServer, *fakeConn) {
	t.Helper()
	conn := newFakeConn()
	opts.NodeName, opts.Conn = testNode, conn
	s := edgeagent.NewLogServer(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, conn
}

func logRequest(t *testing.T, r schema.LogRequest) []byte {
	t.Helper()
	r.SchemaVersion, r.Node = schema.WireVersion, testNode
	b, err := schema.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chunks returns the decoded chunks of stream id published so far.
func chunks(t *testing.T, conn *fakeConn, id string) []schema.LogChunk {
	t.Helper()
	var out []schema.LogChunk
	for _, p := range conn.published(schema.NodeTopic(testNode, schema.TopicLogsResponse)) {
		if p.retained {
			t.Errorf("log chunk published retained")
		}
		c, err := schema.DecodeLogChunk(p.payload)
		if err != nil {
			t.Fatalf("agent published an invalid chunk: %v", err)
		}
		if c.ID == id {
			out = append(out, c)
		}
	}
	return out
}

// serve sends req once, waits for the stream's last chunk and returns the
// stream's text and error. (Sending it again would be a second request with
// the same id, which ends a stream that is not a follow.)
func serve(t *testing.T, s *edgeagent.LogServer, conn *fakeConn, req schema.LogRequest) (string, string) {
	t.Helper()
	s.Handle(logRequest(t, req))
	var got []schema.LogChunk
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if got = chunks(t, conn, req.ID); len(got) == 0 || !got[len(got)-1].EOF {
			return fmt.Errorf("stream %s not finished: %d chunks", req.ID, len(got))
		}
		return nil
	})
	var b strings.Builder
	for i, c := range got {
		if c.Seq != i {
			t.Fatalf("chunk %d has seq %d", i, c.Seq)
		}
		b.WriteString(c.Data)
	}
	return b.String(), got[len(got)-1].Error
}

func TestLogServerStreams(t *testing.T) {
	rt := logRuntime(t, 5)
	s, conn := startLogServer(t, edgeagent.LogServerOptions{Runtime: rt})
	cases := []struct {
		name    string
		req     schema.LogRequest
		want    string
		wantErr string
	}{
		{"first container", schema.LogRequest{ID: "r1", DaemonSet: "edge/agent"}, "main line 0\nmain line 1\nmain line 2\nmain line 3\nmain line 4\n", ""},
		{"tail", schema.LogRequest{ID: "r2", DaemonSet: "edge/agent", Tail: 2}, "main line 3\nmain line 4\n", ""},
		{"named container", schema.LogRequest{ID: "r3", DaemonSet: "edge/agent", Container: "sidecar", Tail: 1}, "sidecar line 4\n", ""},
		{"max bytes", schema.LogRequest{ID: "r4", DaemonSet: "edge/agent", MaxBytes: 6}, "main l\n[edgeset: log output truncated at 6 bytes]\n", ""},
		{"unknown daemonset", schema.LogRequest{ID: "r5", DaemonSet: "edge/other"}, "", "no instance of daemonset edge/other on this node"},
		{"unknown container", schema.LogRequest{ID: "r6", DaemonSet: "edge/agent", Container: "nope"}, "", `daemonset edge/agent has no container "nope" on this node (containers: main, sidecar)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, gotErr := serve(t, s, conn, tc.req)
			if got != tc.want || gotErr != tc.wantErr {
				t.Fatalf("got %q (error %q), want %q (error %q)", got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}

func TestLogServerChunksKeepRunesWhole(t *testing.T) {
	rt := logRuntime(t, 0)
	text := strings.Repeat("é", schema.MaxLogChunkBytes) + "\xff end"
	rt.LogOutput = func(edgeagent.ContainerState, edgeagent.LogOptions) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(text)), nil
	}
	s, conn := startLogServer(t, edgeagent.LogServerOptions{Runtime: rt})
	got, gotErr := serve(t, s, conn, schema.LogRequest{ID: "utf8", DaemonSet: "edge/agent", MaxBytes: schema.MaxLogBytes})
	if gotErr != "" {
		t.Fatal(gotErr)
	}
	if want := strings.ToValidUTF8(text, "\uFFFD"); got != want {
		t.Fatalf("text changed in transit: got %d bytes, want %d", len(got), len(want))
	}
	if n := len(chunks(t, conn, "utf8")); n < 3 {
		t.Fatalf("%d chunks, want the log split in at least 2 plus EOF", n)
	}
}

// blockingLog is a follow stream that yields one line, then blocks until
// closed.
type blockingLog struct {
	first  bool
	once   sync.Once
	closed chan struct{}
}

func (b *blockingLog) Read(p []byte) (int, error) {
	if !b.first {
		b.first = true
		return copy(p, "hello\n"), nil
	}
	<-b.closed
	return 0, io.ErrClosedPipe
}

func (b *blockingLog) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

func TestLogServerFollowCancelAndLimits(t *testing.T) {
	rt := logRuntime(t, 0)
	rt.LogOutput = func(edgeagent.ContainerState, edgeagent.LogOptions) (io.ReadCloser, error) {
		return &blockingLog{closed: make(chan struct{})}, nil
	}
	s, conn := startLogServer(t, edgeagent.LogServerOptions{Runtime: rt, MaxStreams: 1, FollowMax: time.Hour})
	follow := schema.LogRequest{ID: "f1", DaemonSet: "edge/agent", Follow: true}
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if len(chunks(t, conn, "f1")) == 0 {
			s.Handle(logRequest(t, follow))
			return fmt.Errorf("no chunk yet")
		}
		return nil
	})
	// A redelivered request is ignored; a second stream is refused.
	s.Handle(logRequest(t, follow))
	_, refused := serve(t, s, conn, schema.LogRequest{ID: "f2", DaemonSet: "edge/agent"})
	if !strings.Contains(refused, "too many log streams") {
		t.Fatalf("second stream: error %q, want too many log streams", refused)
	}
	s.Handle(logRequest(t, schema.LogRequest{ID: "f1", Cancel: true}))
	// Once cancelled the slot is free again, and the cancelled stream got
	// no EOF: nobody listens for it.
	attempt := 0
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		id := fmt.Sprintf("f3-%d", attempt)
		got := chunks(t, conn, id)
		if len(got) == 0 || got[0].EOF {
			attempt++
			s.Handle(logRequest(t, schema.LogRequest{ID: fmt.Sprintf("f3-%d", attempt), DaemonSet: "edge/agent", Follow: true}))
			return fmt.Errorf("stream %s not started: %+v", id, got)
		}
		if got[0].Data != "hello\n" {
			return fmt.Errorf("stream %s: first chunk %+v", id, got[0])
		}
		return nil
	})
	for _, c := range chunks(t, conn, "f1") {
		if c.EOF {
			t.Errorf("cancelled stream ended with %+v", c)
		}
	}
}

func TestLogServerFollowEndsAfterFollowMax(t *testing.T) {
	rt := logRuntime(t, 0)
	rt.LogOutput = func(edgeagent.ContainerState, edgeagent.LogOptions) (io.ReadCloser, error) {
		return &blockingLog{closed: make(chan struct{})}, nil
	}
	s, conn := startLogServer(t, edgeagent.LogServerOptions{Runtime: rt, FollowMax: 50 * time.Millisecond})
	got, gotErr := serve(t, s, conn, schema.LogRequest{ID: "fm", DaemonSet: "edge/agent", Follow: true})
	if gotErr != "" || !strings.HasPrefix(got, "hello\n") || !strings.Contains(got, "log stream ended after 50ms") {
		t.Fatalf("got %q (error %q)", got, gotErr)
	}
}

func TestLogServerPrevious(t *testing.T) {
	rt := logRuntime(t, 3)
	var mu sync.Mutex
	var got []edgeagent.LogOptions
	lines := rt.LogOutput
	rt.LogOutput = func(c edgeagent.ContainerState, opts edgeagent.LogOptions) (io.ReadCloser, error) {
		mu.Lock()
		got = append(got, opts)
		mu.Unlock()
		return lines(c, opts)
	}
	s, conn := startLogServer(t, edgeagent.LogServerOptions{Runtime: rt})
	byName := func(name string) edgeagent.ContainerState {
		for _, c := range rt.Containers() {
			if c.Labels[edgeagent.LabelContainer] == name {
				return c
			}
		}
		t.Fatalf("no container %s", name)
		return edgeagent.ContainerState{}
	}

	text, errMsg := serve(t, s, conn, schema.LogRequest{ID: "p1", DaemonSet: "edge/agent", Previous: true})
	if text != "" || errMsg != `container "main" of daemonset edge/agent has no terminated run on this node` {
		t.Fatalf("never restarted: got %q (error %q)", text, errMsg)
	}

	ctx := context.Background()
	main := byName("main")
	if err := rt.Crash(main.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, main.ID); err != nil {
		t.Fatal(err)
	}
	restarted := byName("main")
	text, errMsg = serve(t, s, conn, schema.LogRequest{ID: "p2", DaemonSet: "edge/agent", Previous: true, Follow: true, Tail: 2})
	if errMsg != "" || text != "main line 1\nmain line 2\n" {
		t.Fatalf("restarted in place: got %q (error %q)", text, errMsg)
	}
	mu.Lock()
	last := got[len(got)-1]
	mu.Unlock()
	// The previous run ends between its end and the current start; the agent
	// tails it itself, as an engine tails before it applies until.
	if want := (edgeagent.LogOptions{Until: restarted.FinishedAt.Add(restarted.StartedAt.Sub(restarted.FinishedAt) / 2)}); last != want {
		t.Fatalf("restarted in place: log options %+v, want %+v", last, want)
	}

	sidecar := byName("sidecar")
	if err := rt.Crash(sidecar.ID, 1); err != nil {
		t.Fatal(err)
	}
	text, errMsg = serve(t, s, conn, schema.LogRequest{ID: "p3", DaemonSet: "edge/agent", Container: "sidecar", Previous: true})
	if errMsg != "" || text != "sidecar line 0\nsidecar line 1\nsidecar line 2\n" {
		t.Fatalf("exited: got %q (error %q)", text, errMsg)
	}
	mu.Lock()
	last = got[len(got)-1]
	mu.Unlock()
	exited := byName("sidecar")
	if want := (edgeagent.LogOptions{Since: exited.StartedAt.Add(-time.Second)}); last != want {
		t.Fatalf("exited: log options %+v, want %+v (its last run)", last, want)
	}
}
