package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestRotatedTokenRefused: once a node's epoch moves on, its old token is
// refused, its connection made with it is closed, and the new token is
// accepted; other nodes are untouched.
func TestRotatedTokenRefused(t *testing.T) {
	tb := startBroker(t, Options{RevocationPoll: time.Hour}) // only explicit Reload
	oldA := tb.node("node-a")
	a := mustDial(t, tb.Addr(), oldA)
	b := mustDial(t, tb.Addr(), tb.node("node-b"))

	if err := credential.WriteEpochs(tb.dataDir, map[string]uint64{"node-a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Reload(); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if a.IsConnectionOpen() {
			return errors.New("node-a, admitted with its old token, still connected")
		}
		return nil
	})
	if !b.IsConnectionOpen() {
		t.Error("node-b was disconnected by node-a's rotation")
	}
	if _, err := dial(t, tb.Addr(), oldA); err == nil {
		t.Error("the old token of node-a still connects")
	}
	newA := client{user: "node-a", pass: credential.NodeTokenAt(tb.secret, "node-a", 1), id: "node-a"}
	mustDial(t, tb.Addr(), newA)

	// Rotating again refuses epoch 1's token too.
	if err := credential.WriteEpochs(tb.dataDir, map[string]uint64{"node-a": 2}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Reload(); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if _, err := dial(t, tb.Addr(), newA); err == nil {
			return errors.New("epoch 1's token still connects at epoch 2")
		}
		return nil
	})
	mustDial(t, tb.Addr(), client{user: "node-a", pass: credential.NodeTokenAt(tb.secret, "node-a", 2), id: "node-a"})
}

// TestEpochsFilePolled: the broker picks an epoch change up on its own.
func TestEpochsFilePolled(t *testing.T) {
	tb := startBroker(t, Options{RevocationPoll: 10 * time.Millisecond})
	mustDial(t, tb.Addr(), tb.node("node-a")).Disconnect(0)
	if err := credential.WriteEpochs(tb.dataDir, map[string]uint64{"node-a": 1}); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, err := dial(t, tb.Addr(), tb.node("node-a")); err == nil {
			return errors.New("node-a's epoch-0 token still connects")
		}
		return nil
	})
}
