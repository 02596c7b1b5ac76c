package hostile

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

const exporter = "monitoring/exporter"

// device records what a node's runtime was asked to do on demand: the
// commands it ran, the input its interactive sessions read, the logs it
// opened. Its methods are safe for concurrent use.
type device struct {
	mu       sync.Mutex
	commands [][]string // guarded by mu
	input    []string   // guarded by mu: lines read by interactive sessions
	logs     atomic.Int64
}

// runtime sets the fake runtime's exec and log knobs to record into d,
// and allows exec on the node.
func (d *device) runtime(o *edgeagent.NodeOptions, rt *fake.Runtime) {
	o.AllowExec = true
	rt.ExecResult = func(_ edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.commands = append(d.commands, slices.Clone(cmd))
		return 0, []byte("ran " + strings.Join(cmd, " ") + "\n"), nil
	}
	rt.ExecInteractive = func(ctx context.Context, _ edgeagent.ContainerState, opts edgeagent.ExecOptions, stdin io.Reader,
		stdout, _ io.Writer, _ <-chan edgeagent.TerminalSize) (int, error) {
		d.mu.Lock()
		d.commands = append(d.commands, slices.Clone(opts.Cmd))
		d.mu.Unlock()
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			d.mu.Lock()
			d.input = append(d.input, sc.Text())
			d.mu.Unlock()
			fmt.Fprintf(stdout, "> %s\n", sc.Text())
		}
		return 7, ctx.Err()
	}
	rt.LogOutput = func(edgeagent.ContainerState, edgeagent.LogOptions) (io.ReadCloser, error) {
		d.logs.Add(1)
		return io.NopCloser(strings.NewReader("exporter started\n")), nil
	}
}

func (d *device) ran() [][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.commands)
}

func (d *device) read() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.input)
}

// exec runs cmd on node through the API, retrying until the node's
// instance can exec, and returns its output.
func (f *fleet) exec(node string, cmd ...string) string {
	f.t.Helper()
	var out strings.Builder
	checkfor.Eventually(f.t, wait, 100*time.Millisecond, func() error {
		out.Reset()
		code, err := f.api.Exec(context.Background(), exporter, api.ExecRequest{Node: node, Command: cmd},
			func(c api.ExecChunk) error { out.WriteString(c.Data); return nil })
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("exit code %d", code)
		}
		return nil
	})
	return out.String()
}

// logs reads node's exporter log through the API.
func (f *fleet) logs(node string) string {
	f.t.Helper()
	var got string
	checkfor.Eventually(f.t, wait, 100*time.Millisecond, func() error {
		r, err := f.api.Logs(context.Background(), api.LogsRequest{DaemonSet: exporter, Node: node})
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		got = string(b)
		return err
	})
	return got
}

// session is an interactive exec session run through the API.
type session struct {
	id   string
	out  chan api.ExecChunk
	done chan error
	seq  int
}

func (f *fleet) startSession(node string, cmd ...string) *session {
	f.t.Helper()
	s := &session{out: make(chan api.ExecChunk, 64), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	go func() {
		_, err := f.api.Exec(ctx, exporter, api.ExecRequest{Node: node, Command: cmd, StdinStream: true, TimeoutSeconds: 300},
			func(c api.ExecChunk) error { s.out <- c; return nil })
		s.done <- err
		close(s.out)
	}()
	select {
	case c := <-s.out:
		require.NotEmpty(f.t, c.Session, "the first answer names the session")
		s.id = c.Session
	case err := <-s.done:
		f.t.Fatalf("interactive session on %s: %v", node, err)
	case <-time.After(wait):
		f.t.Fatalf("interactive session on %s never started", node)
	}
	return s
}

func (f *fleet) send(s *session, in api.ExecInput) {
	f.t.Helper()
	in.Seq = s.seq
	require.NoError(f.t, f.api.ExecInput(context.Background(), exporter, s.id, in))
	s.seq++
}

// expectOutput waits for the session's output to contain want.
func (f *fleet) expectOutput(s *session, want string) {
	f.t.Helper()
	var got strings.Builder
	deadline := time.After(wait)
	for !strings.Contains(got.String(), want) {
		select {
		case c := <-s.out:
			got.WriteString(c.Data)
		case <-deadline:
			f.t.Fatalf("session output %q, want it to contain %q", got.String(), want)
		}
	}
}

// signRequest signs v as a request on topic for node, issued at issued,
// with key, as the controller signs one.
func signRequest(t *testing.T, key ed25519.PrivateKey, topic, node string, issued time.Time, v any) []byte {
	t.Helper()
	env, err := signing.NewSigner(key).Sign(signing.Statement{Topic: topic, Node: node,
		IssuedAt: issued, ExpiresAt: issued.Add(signing.RequestValidity), Body: mustJSON(t, v)})
	require.NoError(t, err)
	return env
}

// body is the request in a captured envelope (or the captured request,
// if it travelled plain).
func body[T any](t *testing.T, env []byte) T {
	t.Helper()
	b := env
	if signing.IsEnvelope(env) {
		var e signing.Envelope
		require.NoError(t, json.Unmarshal(env, &e))
		var st signing.Statement
		require.NoError(t, json.Unmarshal(e.Payload, &st))
		b = st.Body
	}
	var v T
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

// tamperInput replaces the data of a captured, signed input chunk,
// keeping its signature.
func tamperInput(t *testing.T, env, data []byte) []byte {
	t.Helper()
	var e signing.Envelope
	require.NoError(t, json.Unmarshal(env, &e))
	var st signing.Statement
	require.NoError(t, json.Unmarshal(e.Payload, &st))
	in := body[schema.ExecInput](t, env)
	in.Data = data
	st.Body = mustJSON(t, in)
	e.Payload = mustJSON(t, st)
	return mustJSON(t, e)
}

// capturedWhen waits for the attacker to have captured a message on topic
// and returns the first that ok accepts.
func (a *attacker) capturedWhen(t *testing.T, topic string, ok func([]byte) bool) []byte {
	t.Helper()
	var got []byte
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		for _, m := range a.captured(topic) {
			if ok(m) {
				got = m
				return nil
			}
		}
		return fmt.Errorf("nothing captured on %s yet", topic)
	})
	return got
}

// answered reports whether node published any exec or log answer with id.
func (a *attacker) answered(t *testing.T, node, id string) bool {
	t.Helper()
	for _, kind := range []string{schema.TopicExecResponse, schema.TopicLogsResponse} {
		for _, m := range a.captured(schema.NodeTopic(node, kind)) {
			var c struct{ ID string }
			require.NoError(t, json.Unmarshal(m, &c))
			if c.ID == id {
				return true
			}
		}
	}
	return false
}

// sendRequest publishes a request as the attacker, not retained.
func (a *attacker) sendRequest(t *testing.T, topic string, payload []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, a.client.Publish(ctx, topic, payload, false))
}

func TestHostileRequestsEmbeddedBroker(t *testing.T) { testHostileRequests(t, false) }

func TestHostileRequestsMosquitto(t *testing.T) { testHostileRequests(t, true) }

// testHostileRequests: with signing on, exec (plain and interactive) and
// logs work end to end through the API; an attacker holding the
// controller's MQTT credential, but not its key, gets nothing run, typed
// or read: a forged, unsigned, replayed, expired or cross-node exec
// request, forged input into a live interactive session, and a forged,
// unsigned or replayed log request are each refused by the node, nothing
// runs and nothing is answered, and the controller's API shows each
// refusal.
func testHostileRequests(t *testing.T, mosquittoBroker bool) {
	f := startFleet(t, mosquittoBroker)
	f.delegate(1)
	evil := f.startAttacker()
	var d1, d2, d3 device
	gw1, gw2, gw3 := f.startAgent("gw-1", d1.runtime), f.startAgent("gw-2", d2.runtime), f.startAgent("gw-3", d3.runtime)
	f.apply("registry.local/exporter:1.0")
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		return errorsJoin(gw1.expectRunning("registry.local/exporter:1.0"), gw2.expectRunning("registry.local/exporter:1.0"),
			gw3.expectRunning("registry.local/exporter:1.0"))
	})

	// Signed exec, interactive exec and logs work end to end.
	require.Equal(t, "ran id\n", f.exec("gw-1", "id"))
	require.Equal(t, [][]string{{"id"}}, d1.ran())
	sess := f.startSession("gw-2", "sh")
	f.send(sess, api.ExecInput{Data: []byte("one\n")})
	f.expectOutput(sess, "> one\n")
	require.Equal(t, "exporter started\n", f.logs("gw-3"))
	require.Equal(t, int64(1), d3.logs.Load())
	for _, a := range []*agent{gw1, gw2, gw3} {
		require.Empty(t, a.node.Agent().Refusals(), "node %s refused nothing signed", a.name)
	}

	// What the attacker captured of it.
	execTopic1, execTopic2 := schema.NodeTopic("gw-1", schema.TopicExecRequest), schema.NodeTopic("gw-2", schema.TopicExecRequest)
	logsTopic3 := schema.NodeTopic("gw-3", schema.TopicLogsRequest)
	inputTopic := schema.ExecInputTopic("gw-2", sess.id)
	isRequest := func(env []byte) bool { return !body[schema.ExecRequest](t, env).Cancel }
	capturedExec1 := evil.capturedWhen(t, execTopic1, isRequest)
	capturedExec2 := evil.capturedWhen(t, execTopic2, isRequest)
	capturedLogs3 := evil.capturedWhen(t, logsTopic3, func(env []byte) bool { return !body[schema.LogRequest](t, env).Cancel })
	capturedInput := evil.capturedWhen(t, inputTopic, func([]byte) bool { return true })
	require.True(t, signing.IsEnvelope(capturedExec1), "exec requests travel signed")

	attackerKey := mustKey(t)
	onlineKey, err := signing.ReadPrivateKeyFile(filepath.Join(f.dir, "signing.key"))
	require.NoError(t, err)
	now := time.Now()
	evilExec := func(id string) schema.ExecRequest {
		return schema.ExecRequest{SchemaVersion: schema.WireVersion, Node: "gw-1", ID: id, DaemonSet: exporter, Command: []string{"evil", id}}
	}
	evilInput := func(seq int) schema.ExecInput {
		return schema.ExecInput{SchemaVersion: schema.WireVersion, Node: "gw-2", ID: sess.id, Seq: seq, Data: []byte("evil\n")}
	}
	evilLogs := func(id string) schema.LogRequest {
		return schema.LogRequest{SchemaVersion: schema.WireVersion, Node: "gw-3", ID: id, DaemonSet: exporter}
	}
	attacks := []struct {
		name, node, topic, reason string
		id                        string // of the request, for its answer; "" for input
		payload                   []byte
	}{
		{"forged exec request", "gw-1", execTopic1, "SigningKeyUnknown", "forged",
			signRequest(t, attackerKey, execTopic1, "gw-1", now, evilExec("forged"))},
		{"unsigned exec request", "gw-1", execTopic1, "SignedDocumentMissing", "unsigned", mustJSON(t, evilExec("unsigned"))},
		{"replayed exec request", "gw-1", execTopic1, "SignedRequestReplayed", "", capturedExec1},
		{"gw-2's exec request on gw-1's topic", "gw-1", execTopic1, "SignedDocumentWrongTopic", "", capturedExec2},
		// An exec request the controller did sign, expired (the test
		// reads the online key to make one; the attacker would have
		// recorded it when it was current).
		{"expired exec request", "gw-1", execTopic1, "SignedDocumentExpired", "expired",
			signRequest(t, onlineKey, execTopic1, "gw-1", now.Add(-5*time.Minute), evilExec("expired"))},
		{"tampered input chunk", "gw-2", inputTopic, "SignatureInvalid", "", tamperInput(t, capturedInput, []byte("evil\n"))},
		{"unsigned input chunk", "gw-2", inputTopic, "SignedDocumentMissing", "", mustJSON(t, evilInput(1))},
		{"forged input chunk", "gw-2", inputTopic, "SigningKeyUnknown", "", signRequest(t, attackerKey, inputTopic, "gw-2", now, evilInput(1))},
		{"forged log request", "gw-3", logsTopic3, "SigningKeyUnknown", "forged-logs",
			signRequest(t, attackerKey, logsTopic3, "gw-3", now, evilLogs("forged-logs"))},
		{"unsigned log request", "gw-3", logsTopic3, "SignedDocumentMissing", "unsigned-logs", mustJSON(t, evilLogs("unsigned-logs"))},
		{"replayed log request", "gw-3", logsTopic3, "SignedRequestReplayed", "", capturedLogs3},
	}
	agents := map[string]*agent{"gw-1": gw1, "gw-2": gw2, "gw-3": gw3}
	for _, a := range attacks {
		before := f.refusals(a.node)[a.reason]
		evil.sendRequest(t, a.topic, a.payload)
		f.expectRefused(a.node, a.reason, before)
		require.NotZero(t, agents[a.node].node.Agent().Refusals()[a.reason], "%s: counted by the agent", a.name)
	}

	// Nothing ran, nothing was typed, nothing was read, nothing answered.
	require.Equal(t, [][]string{{"id"}}, d1.ran(), "gw-1 ran only the signed command, once")
	require.Equal(t, int64(1), d3.logs.Load(), "gw-3 opened its log only for the signed request, once")
	for _, a := range attacks {
		if a.id != "" {
			assert.False(t, evil.answered(t, a.node, a.id), "%s: answered", a.name)
		}
	}
	// The live session takes signed input still, and only that.
	f.send(sess, api.ExecInput{Data: []byte("two\n")})
	f.expectOutput(sess, "> two\n")
	f.send(sess, api.ExecInput{EOF: true})
	select {
	case err := <-sess.done:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("the session did not end at its input's end")
	}
	require.Equal(t, []string{"one", "two"}, d2.read(), "gw-2's session read only the signed input")
	require.Equal(t, [][]string{{"sh"}}, d2.ran())
	require.Equal(t, "ran id\n", f.exec("gw-1", "id"), "gw-1 still runs what the controller signs")

	// The refusals are node events too.
	for node, want := range map[string][]string{
		"gw-1": {"SigningKeyUnknown", "SignedDocumentMissing", "SignedRequestReplayed", "SignedDocumentWrongTopic", "SignedDocumentExpired"},
		"gw-2": {"SignatureInvalid", "SignedDocumentMissing", "SigningKeyUnknown"},
		"gw-3": {"SigningKeyUnknown", "SignedDocumentMissing", "SignedRequestReplayed"},
	} {
		evs, err := f.api.Events(context.Background(), api.EventFilter{Object: "node/" + node})
		require.NoError(t, err)
		var reasons []string
		for _, e := range evs {
			reasons = append(reasons, e.Reason)
		}
		for _, r := range want {
			require.Contains(t, reasons, r, "node %s", node)
		}
	}
}
