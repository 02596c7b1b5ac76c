package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

const suback80 = 0x80 // SUBACK failure return code

func TestConnectAuthentication(t *testing.T) {
	// Every refusal below is a failed login from loopback: keep them from
	// starting its back-off (TestAuthFailuresBackOff covers that).
	tb := startBroker(t, Options{Limits: Limits{AuthFailureLimit: 1000}})
	good := tb.node("node-a")
	dotted := tb.node("node-a.site")
	tests := []struct {
		name string
		c    client
		ok   bool
	}{
		{"node with its token", good, true},
		{"controller with its token", tb.controller(), true},
		{"anonymous", client{id: "anon"}, false},
		{"wrong password", client{user: "node-a", pass: "not-the-token", id: "node-a"}, false},
		{"other node's token", client{user: "node-a", pass: credential.NodeToken(tb.secret, "node-b"), id: "node-a"}, false},
		{"token of another fleet", client{user: "node-a", pass: credential.NodeToken([]byte("other secret of 32 bytes......."), "node-a"), id: "node-a"}, false},
		{"client id of another node", client{user: "node-a", pass: good.pass, id: "node-b"}, false},
		{"dotted node, its name as client id", dotted, true},
		{"dotted node, its MQTT client id", client{user: dotted.user, pass: dotted.pass, id: "node-a_site"}, true},
		{"dotted node, another's MQTT client id", client{user: dotted.user, pass: dotted.pass, id: "node-b_site"}, false},
		{"controller with node-style token", client{user: credential.ControllerUsername, pass: credential.NodeToken(tb.secret, credential.ControllerUsername), id: "c"}, false},
		{"invalid node name", client{user: "Node/A", pass: credential.NodeToken(tb.secret, "Node/A"), id: "Node/A"}, false},
		{"wildcard node name", client{user: "#", pass: credential.NodeToken(tb.secret, "#"), id: "#"}, false},
		{"will on own online topic", withWill(good, schema.NodeTopic("node-a", schema.TopicOnline)), true},
		{"will on another node's topic", withWill(good, schema.NodeTopic("node-b", schema.TopicOnline)), false},
		{"will on own desired topic", withWill(good, schema.NodeTopic("node-a", schema.TopicDesired)), false},
	}
	refused := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := dial(t, tb.Addr(), tc.c)
			if tc.ok && err != nil {
				t.Fatalf("connect refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("connect accepted")
			}
			if cl != nil {
				cl.Disconnect(0)
			} else {
				refused++
			}
		})
	}
	if got := tb.Stats().AuthFailures; got != int64(refused) {
		t.Errorf("Stats().AuthFailures = %d, want %d", got, refused)
	}
}

// withWill returns c with a retained will on topic.
func withWill(c client, topic string) client {
	c.will = &will{topic: topic, payload: "offline", retained: true}
	return c
}

func TestRevokedNodeRefused(t *testing.T) {
	tb := startBroker(t, Options{RevocationPoll: time.Hour}) // only explicit Reload
	a := mustDial(t, tb.Addr(), tb.node("node-a"))
	mustDial(t, tb.Addr(), tb.node("node-b"))

	if err := credential.Revoke(tb.dataDir, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := credential.Revoke(tb.dataDir, credential.TokenFingerprint(credential.NodeToken(tb.secret, "node-b"))); err != nil {
		t.Fatal(err)
	}
	if err := tb.Reload(); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if a.IsConnectionOpen() {
			return errors.New("revoked node-a still connected")
		}
		return nil
	})
	for _, node := range []string{"node-a", "node-b"} {
		if _, err := dial(t, tb.Addr(), tb.node(node)); err == nil {
			t.Errorf("revoked %s connected", node)
		}
	}
	mustDial(t, tb.Addr(), tb.node("node-c"))
}

func TestRevocationFilePolled(t *testing.T) {
	tb := startBroker(t, Options{RevocationPoll: 10 * time.Millisecond})
	mustDial(t, tb.Addr(), tb.node("node-a")).Disconnect(0)
	if err := credential.Revoke(tb.dataDir, "node-a"); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, err := dial(t, tb.Addr(), tb.node("node-a")); err == nil {
			return errors.New("revoked node-a still connects")
		}
		return nil
	})
}

func TestNodeCannotReadOtherNodes(t *testing.T) {
	tb := startBroker(t, Options{})
	ctl := mustDial(t, tb.Addr(), tb.controller())
	a := mustDial(t, tb.Addr(), tb.node("node-a"))
	desiredA := schema.NodeTopic("node-a", schema.TopicDesired)
	desiredB := schema.NodeTopic("node-b", schema.TopicDesired)
	revision := schema.RevisionTopic("0123456789abcdef0123")

	var in inbox
	for _, filter := range []string{desiredB, "#", "edgeset/#", "edgeset/v1/#", schema.NodeWildcard(schema.TopicDesired),
		"edgeset/v1/nodes/node-a/+", "edgeset/v1/revisions/+", "$share/g/" + desiredB, "$SYS/#"} {
		if code := subscribe(t, a, filter, &in); code != suback80 {
			t.Errorf("node-a subscribe %s: SUBACK %#x, want %#x", filter, code, suback80)
		}
	}
	for _, filter := range []string{desiredA, revision} {
		if code := subscribe(t, a, filter, &in); code != 1 {
			t.Errorf("node-a subscribe %s: SUBACK %#x, want 1", filter, code)
		}
	}

	publish(t, ctl, desiredB, 1, true, "for b")
	publish(t, ctl, schema.NodeTopic("node-b", schema.TopicStatus), 1, true, "b status")
	publish(t, ctl, revision, 1, true, "rev")
	publish(t, ctl, desiredA, 1, true, "for a") // delivered after the others
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(desiredA, "for a"))
	for _, m := range in.all() {
		if m.topic != desiredA && m.topic != revision {
			t.Errorf("node-a received %q on %s", m.payload, m.topic)
		}
	}
	if err := in.has(revision, "rev")(); err != nil {
		t.Error(err)
	}
}

func TestNodeCannotWriteOtherTopics(t *testing.T) {
	tb := startBroker(t, Options{})
	ctl := mustDial(t, tb.Addr(), tb.controller())
	var seen inbox
	subscribe(t, ctl, "edgeset/#", &seen)
	a := mustDial(t, tb.Addr(), tb.node("node-a"))

	forbidden := []string{
		schema.NodeTopic("node-b", schema.TopicStatus),
		schema.NodeTopic("node-b", schema.TopicObserved),
		schema.NodeTopic("node-b", schema.TopicOnline),
		schema.NodeTopic("node-a", schema.TopicDesired),
		schema.NodeTopic("node-b", schema.TopicDesired),
		schema.RevisionTopic("0123456789abcdef0123"),
	}
	for _, topic := range forbidden {
		publish(t, a, topic, 0, true, "forged")
	}
	own := schema.NodeTopic("node-a", schema.TopicStatus)
	publish(t, a, own, 1, true, "mine") // delivered after the forgeries
	checkfor.Eventually(t, wait, 10*time.Millisecond, seen.has(own, "mine"))
	for _, m := range seen.all() {
		if m.topic != own {
			t.Errorf("controller received %q on %s from node-a", m.payload, m.topic)
		}
	}

	// MQTT 3.1.1 has no negative PUBACK: a forbidden QoS 1 publish
	// disconnects the client.
	a.Publish(schema.NodeTopic("node-b", schema.TopicStatus), 1, false, "forged")
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if a.IsConnectionOpen() {
			return errors.New("node-a still connected after forbidden QoS 1 publish")
		}
		return nil
	})
}

func TestRetainedDesiredOnReconnect(t *testing.T) {
	tb := startBroker(t, Options{})
	ctl := mustDial(t, tb.Addr(), tb.controller())
	desired := schema.NodeTopic("node-a", schema.TopicDesired)
	publish(t, ctl, desired, 1, true, "gen 1")
	for i := range 2 {
		a := mustDial(t, tb.Addr(), tb.node("node-a"))
		var in inbox
		subscribe(t, a, desired, &in)
		checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(desired, "gen 1"))
		if m := in.all()[0]; !m.retained {
			t.Errorf("connection %d: message not flagged retained", i)
		}
		a.Disconnect(0)
	}
}

func TestRetainedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	desired := schema.NodeTopic("node-a", schema.TopicDesired)
	deleted := schema.NodeTopic("node-b", schema.TopicDesired)

	first := startBroker(t, Options{DataDir: dir})
	ctl := mustDial(t, first.Addr(), first.controller())
	publish(t, ctl, desired, 1, true, "gen 7")
	publish(t, ctl, deleted, 1, true, "gone soon")
	publish(t, ctl, deleted, 1, true, "") // clears the retained message
	ctl.Disconnect(0)
	first.stop()

	second := startBroker(t, Options{DataDir: dir})
	var in inbox
	subscribe(t, mustDial(t, second.Addr(), second.controller()), "edgeset/#", &in)
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(desired, "gen 7"))
	if got := in.all(); len(got) != 1 {
		t.Errorf("after restart got %v, want only %s", got, desired)
	}
}

// TestRepublishedTopicsAreNotPersisted: the retained messages of topics
// Options.Republished names live in memory only, and a broker.db written
// before (by a broker without the option) loses them at the next start,
// so a restarted broker never serves a copy its publisher has replaced.
func TestRepublishedTopicsAreNotPersisted(t *testing.T) {
	dir := t.TempDir()
	desired := schema.NodeTopic("node-a", schema.TopicDesired)
	old := schema.NodeTopic("node-b", schema.TopicDesired)
	status := schema.NodeTopic("node-a", schema.TopicStatus)
	republished := func(topic string) bool { return strings.HasSuffix(topic, "/"+schema.TopicDesired) }

	before := startBroker(t, Options{DataDir: dir}) // an earlier version: persists everything
	ctl := mustDial(t, before.Addr(), before.controller())
	publish(t, ctl, old, 1, true, "persisted before")
	ctl.Disconnect(0)
	before.stop()

	first := startBroker(t, Options{DataDir: dir, Republished: republished})
	ctl = mustDial(t, first.Addr(), first.controller())
	var live inbox
	subscribe(t, ctl, "edgeset/#", &live)
	publish(t, ctl, desired, 1, true, "gen 7")
	a := mustDial(t, first.Addr(), first.node("node-a"))
	publish(t, a, status, 1, true, "ready")
	checkfor.Eventually(t, wait, 10*time.Millisecond, live.has(desired, "gen 7"))
	checkfor.Eventually(t, wait, 10*time.Millisecond, live.has(status, "ready"))
	for _, m := range live.all() {
		if m.topic == old {
			t.Errorf("the copy of %s persisted before was served: %q", old, m.payload)
		}
	}
	a.Disconnect(0)
	ctl.Disconnect(0)
	first.stop()

	second := startBroker(t, Options{DataDir: dir}) // whatever the option, nothing republished was kept
	var in inbox
	subscribe(t, mustDial(t, second.Addr(), second.controller()), "edgeset/#", &in)
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(status, "ready"))
	if got := in.all(); len(got) != 1 {
		t.Errorf("after restart got %v, want only %s", got, status)
	}
}

func TestWillPublishedOnOnlineTopic(t *testing.T) {
	tb := startBroker(t, Options{})
	online := schema.NodeTopic("node-a", schema.TopicOnline)
	ctl := mustDial(t, tb.Addr(), tb.controller())
	var in inbox
	subscribe(t, ctl, online, &in)

	var conn net.Conn
	c := withWill(tb.node("node-a"), online)
	c.conn = &conn
	a := mustDial(t, tb.Addr(), c)
	publish(t, a, online, 1, true, "online")
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(online, "online"))

	if err := conn.Close(); err != nil { // the link drops, no DISCONNECT
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(online, "offline"))
}

func TestDroppedMessagesReported(t *testing.T) {
	var drops atomic.Int64
	var dropClient atomic.Value
	tb := startBroker(t, Options{
		Limits: Limits{MaxPendingWrites: 2},
		OnDrop: func(clientID, _ string) {
			drops.Add(1)
			dropClient.Store(clientID)
		},
	})
	ctl := mustDial(t, tb.Addr(), tb.controller())
	slow := mustDial(t, tb.Addr(), tb.node("node-a"))
	desired := schema.NodeTopic("node-a", schema.TopicDesired)
	block := make(chan struct{})
	defer close(block)
	tok := slow.Subscribe(desired, 0, func(_ paho.Client, _ paho.Message) { <-block })
	if !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	payload := string(make([]byte, 64<<10))
	checkfor.Eventually(t, wait, time.Millisecond, func() error {
		ctl.Publish(desired, 0, false, payload).WaitTimeout(wait)
		if tb.Stats().Dropped == 0 || drops.Load() == 0 {
			return errors.New("no drop yet")
		}
		return nil
	})
	if got := dropClient.Load(); got != "node-a" {
		t.Errorf("OnDrop client = %v, want node-a", got)
	}
}

func TestCloseTwiceAndRunAfterClose(t *testing.T) {
	b, err := New(Options{DataDir: t.TempDir(), Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		c, err := net.Dial("tcp", b.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	})
	if err := b.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	cancel()
	if err := b.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run on closed broker = %v, want ErrClosed", err)
	}
	if _, err := net.Dial("tcp", b.Addr().String()); err == nil {
		t.Fatal("listener still accepts after Close")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{"no data dir", Options{}, ErrNoDataDir},
		{"TLS addr without cert", Options{DataDir: t.TempDir(), TLSAddr: "127.0.0.1:0"}, ErrTLSIncomplete},
		{"cert without key", Options{DataDir: t.TempDir(), TLSAddr: "127.0.0.1:0", CertFile: "x.pem"}, ErrTLSIncomplete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = slog.New(slog.DiscardHandler)
			b, err := New(tc.opts)
			if !errors.Is(err, tc.want) {
				if b != nil {
					b.Close()
				}
				t.Fatalf("New = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestDamagedRetainedStoreIsSetAside: a broker.db bbolt cannot read does not
// keep the broker from starting: it is moved aside unchanged, the error is
// logged, and the broker serves and persists retained messages again.
func TestDamagedRetainedStoreIsSetAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFile)
	garbage := bytes.Repeat([]byte("not a bbolt file "), 1000)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	tb := startBroker(t, Options{DataDir: dir, Logger: slog.New(logs)})
	if got := logs.matching(`ERROR "the broker's retained store was damaged`, "movedTo="+path+".damaged-"); len(got) != 1 {
		t.Errorf("want one error record of the damaged store, got %q", got)
	}
	aside, err := filepath.Glob(path + ".damaged-*")
	if err != nil || len(aside) != 1 {
		t.Fatalf("damaged file kept as %v (%v), want one", aside, err)
	}
	if kept, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(kept, garbage) {
		t.Errorf("damaged file not kept unchanged (%v)", err)
	}

	desired := schema.NodeTopic("node-a", schema.TopicDesired)
	publish(t, mustDial(t, tb.Addr(), tb.controller()), desired, 1, true, "gen 1")
	tb.stop()
	again := startBroker(t, Options{DataDir: dir})
	var in inbox
	subscribe(t, mustDial(t, again.Addr(), again.controller()), "edgeset/#", &in)
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(desired, "gen 1"))
}

// TestNodeCannotReadOtherNodesSecrets: a node's secrets reach it on its own
// exact topics only; another node can neither name them nor match them with
// a wildcard, while both may read a ConfigMap topic.
func TestNodeCannotReadOtherNodesSecrets(t *testing.T) {
	tb := startBroker(t, Options{})
	ctl := mustDial(t, tb.Addr(), tb.controller())
	b := mustDial(t, tb.Addr(), tb.node("node-b"))
	const hash = "0123456789abcdef0123"
	secretA := schema.NodeSecretTopic("node-a", hash)
	secretB := schema.NodeSecretTopic("node-b", hash)
	configMap := schema.ConfigMapTopic(hash)

	var in inbox
	for _, filter := range []string{secretA, "edgeset/v1/nodes/node-a/secrets/#", "edgeset/v1/nodes/node-a/secrets/+",
		"edgeset/v1/nodes/+/secrets/" + hash, "edgeset/v1/nodes/node-b/secrets/+", "edgeset/v1/configmaps/+"} {
		if code := subscribe(t, b, filter, &in); code != suback80 {
			t.Errorf("node-b subscribe %s: SUBACK %#x, want %#x", filter, code, suback80)
		}
	}
	for _, filter := range []string{secretB, configMap} {
		if code := subscribe(t, b, filter, &in); code != 1 {
			t.Errorf("node-b subscribe %s: SUBACK %#x, want 1", filter, code)
		}
	}
	publish(t, ctl, secretA, 1, true, "secret of a")
	publish(t, ctl, configMap, 1, true, "cm")
	publish(t, ctl, secretB, 1, true, "secret of b") // delivered after the others
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(secretB, "secret of b"))
	for _, m := range in.all() {
		if m.topic != secretB && m.topic != configMap {
			t.Errorf("node-b received %q on %s", m.payload, m.topic)
		}
	}
	if err := in.has(configMap, "cm")(); err != nil {
		t.Error(err)
	}
}

// TestNodeSubscriptionsAreBounded: a node may subscribe to any revision,
// ConfigMap or own-secret topic, each an exact filter; without a bound
// one connection could grow the broker's topic tree without end with
// distinct hashes. Past the limit a new filter is refused; filters it
// holds may be renewed, and room comes back with an unsubscribe. The
// controller is not bounded.
func TestNodeSubscriptionsAreBounded(t *testing.T) {
	const limit = 10_000 // defaultMaxSubscriptions
	tb := startBroker(t, Options{})
	a := mustDial(t, tb.Addr(), tb.node("node-a"))
	ctl := mustDial(t, tb.Addr(), tb.controller())
	var in inbox
	subscribeMany := func(cl paho.Client, from, n int) map[string]byte {
		filters := map[string]byte{}
		for i := from; i < from+n; i++ {
			filters[schema.RevisionTopic(fmt.Sprintf("%020x", i))] = 1
		}
		tok := cl.SubscribeMultiple(filters, in.handle)
		if !tok.WaitTimeout(wait) || tok.Error() != nil {
			t.Fatalf("subscribe %d filters: %v", n, tok.Error())
		}
		return tok.(*paho.SubscribeToken).Result()
	}
	for from := 0; from < limit; from += 1000 {
		for f, code := range subscribeMany(a, from, 1000) {
			if code != 1 {
				t.Fatalf("node-a subscribe %s (within the limit): SUBACK %#x", f, code)
			}
		}
	}
	if code := subscribe(t, a, schema.RevisionTopic(fmt.Sprintf("%020x", limit)), &in); code != suback80 {
		t.Errorf("node-a subscription %d: SUBACK %#x, want %#x", limit+1, code, suback80)
	}
	first := schema.RevisionTopic(fmt.Sprintf("%020x", 0))
	if code := subscribe(t, a, first, &in); code != 1 {
		t.Errorf("node-a renews %s: SUBACK %#x, want 1", first, code)
	}
	if tok := a.Unsubscribe(first); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("unsubscribe: %v", tok.Error())
	}
	if code := subscribe(t, a, schema.RevisionTopic(fmt.Sprintf("%020x", limit+1)), &in); code != 1 {
		t.Errorf("node-a subscribe after an unsubscribe: SUBACK %#x, want 1", code)
	}
	for from := 0; from < limit+1000; from += 1000 {
		for f, code := range subscribeMany(ctl, from, 1000) {
			if code != 1 {
				t.Fatalf("controller subscribe %s: SUBACK %#x", f, code)
			}
		}
	}
}
