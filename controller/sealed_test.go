package controller

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/datakey"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
	"github.com/edgeset/edgeset/signing"
)

// secretTopicOf waits for node's desired state to list the api-key Secret
// and returns its topic.
func secretTopicOf(t *testing.T, n *fakeNode) (topic, hash string) {
	t.Helper()
	d := n.expectDesired(func(d schema.DesiredState) error {
		if len(d.Secrets) != 1 {
			return fmt.Errorf("secrets %v", d.Secrets)
		}
		return nil
	})
	return schema.NodeSecretTopic(n.name, d.Secrets[0].Hash), d.Secrets[0].Hash
}

// eventsOf lists the reasons and messages of the events of object.
func objectEvents(t *testing.T, tc *testController, object string) string {
	t.Helper()
	events, err := tc.api.Events(context.Background(), api.EventFilter{})
	require.NoError(t, err)
	var out []string
	for _, e := range events {
		if e.Object == object {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return strings.Join(out, "\n")
}

// TestSecretWithheldFromANodeWithoutKey: a node that registered no key is
// not sent its Secret, in the clear or at all; an event says why, once.
// Once it registers a key the Secret is published, sealed to it.
func TestSecretWithheldFromANodeWithoutKey(t *testing.T) {
	tc := startController(t, Config{})
	s := startSpy(t, tc)
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false))
	topic, hash := secretTopicOf(t, a)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if !strings.Contains(objectEvents(t, tc, "node/node-a"), ReasonSecretsWithheld) {
			return fmt.Errorf("no %s event", ReasonSecretsWithheld)
		}
		return nil
	})
	_, published := s.last(topic)
	assert.False(t, published, "nothing is published for a node without a key")
	assert.Empty(t, s.topicsWith(base64.StdEncoding.EncodeToString([]byte(secretValue))))
	_, err := tc.api.GetNodeKey(context.Background(), "node-a")
	assert.Equal(t, http.StatusNotFound, statusCode(err))

	ring := registerKey(t, tc, "node-a")
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		p, ok := s.last(topic)
		if !ok {
			return fmt.Errorf("nothing on %s after the key was registered", topic)
		}
		sm, err := openSealed("node-a", hash, []byte(p), ring)
		if err != nil {
			return err
		}
		if string(sm.Secret.Data["token"]) != secretValue {
			return fmt.Errorf("opened the wrong secret")
		}
		return nil
	})
	assert.Equal(t, 1, strings.Count(objectEvents(t, tc, "node/node-a"), ReasonSecretsWithheld), "one event per node")
	key, err := tc.api.GetNodeKey(context.Background(), "node-a")
	require.NoError(t, err)
	assert.Equal(t, ring.Current.KeyID(), key.KeyID)
	assert.Equal(t, "node", key.Source)
}

// TestUnsealedSecretsFallback: with the compatibility switch a node
// without a key gets its Secret in the clear, and an event says so.
func TestUnsealedSecretsFallback(t *testing.T) {
	tc := startController(t, Config{UnsealedSecretsFallback: true})
	s := startSpy(t, tc)
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false))
	topic, _ := secretTopicOf(t, a)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		p, ok := s.last(topic)
		if !ok || schema.IsSealedSecret([]byte(p)) {
			return fmt.Errorf("no unsealed secret on %s", topic)
		}
		if !strings.Contains(objectEvents(t, tc, "node/node-a"), ReasonSecretsUnsealed) {
			return fmt.Errorf("no %s event", ReasonSecretsUnsealed)
		}
		return nil
	})
	p, _ := s.last(topic)
	sm, err := schema.DecodeSecretMessage([]byte(p))
	require.NoError(t, err)
	assert.Equal(t, secretValue, string(sm.Secret.Data["token"]))
}

// TestNodeKeyReplacementNeedsProof: whoever holds only a node's token (a
// broker operator sees it in every CONNECT) cannot replace the node's
// registered key: the controller answers with a challenge sealed to the
// registered key, and only an answer opened with it is taken. The node
// rotating its key answers it, and its Secret is published sealed to the
// new key. An admin may set a key, and forget one.
func TestNodeKeyReplacementNeedsProof(t *testing.T) {
	var clock atomic.Int64 // Unix nanoseconds
	clock.Store(time.Now().UnixNano())
	advance := func() { clock.Add(int64(2 * minKeyChangeInterval)) }
	tc := startController(t, Config{Clock: func() time.Time { return time.Unix(0, clock.Load()) }})
	s := startSpy(t, tc)
	ctx := context.Background()
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	old := registerKey(t, tc, "node-a")
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false))
	topic, hash := secretTopicOf(t, a)
	nc := api.NewNodeClient("http://"+tc.APIAddr().String(), "node-a", credential.NodeToken(tc.secret, "node-a"), nil)

	// An attacker with the token and a key of its own.
	evil, err := sealing.GenerateKey()
	require.NoError(t, err)
	_, _, err = nc.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: evil.Public().String()})
	assert.Equal(t, http.StatusTooManyRequests, statusCode(err), "a key is replaced at most once a minute: %v", err)
	advance()
	_, ch, err := nc.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: evil.Public().String()})
	require.NoError(t, err)
	require.NotNil(t, ch, "another key needs a proof")
	assert.Equal(t, old.Current.KeyID(), ch.KeyID)
	_, err = sealing.Keyring{Current: evil}.OpenChallenge("node-a", evil.Public(), ch.Challenge)
	require.ErrorIs(t, err, sealing.ErrNotForKey, "the attacker cannot open the challenge")
	_, _, err = nc.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: evil.Public().String(), Proof: bytes.Repeat([]byte{1}, 40)})
	assert.Equal(t, http.StatusForbidden, statusCode(err), "a guessed proof is refused: %v", err)
	key, err := tc.api.GetNodeKey(ctx, "node-a")
	require.NoError(t, err)
	assert.Equal(t, old.Current.KeyID(), key.KeyID, "the registered key stays")

	// The node rotates: it opens the challenge with its registered key.
	rotated, err := old.Rotate()
	require.NoError(t, err)
	_, ch, err = nc.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: rotated.Current.Public().String()})
	require.NoError(t, err)
	require.NotNil(t, ch)
	answer, err := rotated.OpenChallenge("node-a", rotated.Current.Public(), ch.Challenge)
	require.NoError(t, err)
	got, ch, err := nc.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: rotated.Current.Public().String(), Proof: answer})
	require.NoError(t, err)
	require.Nil(t, ch)
	assert.Equal(t, rotated.Current.KeyID(), got.KeyID)
	assert.Equal(t, "node rotation", got.Source)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		p, _ := s.last(topic)
		_, err := openSealed("node-a", hash, []byte(p), sealing.Keyring{Current: rotated.Current})
		return err // re-sealed to the new key
	})

	// An admin sets a key read off the device, and forgets it.
	admin, err := sealing.GenerateKey()
	require.NoError(t, err)
	set, err := tc.api.SetNodeKey(ctx, "node-a", admin.Public().String())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(set.Source, "admin "), set.Source)
	_, err = tc.api.SetNodeKey(ctx, "node-a", "x25519:AAAA")
	assert.Equal(t, http.StatusBadRequest, statusCode(err))
	require.NoError(t, tc.api.DeleteNodeKey(ctx, "node-a"))
	_, err = tc.api.GetNodeKey(ctx, "node-a")
	assert.Equal(t, http.StatusNotFound, statusCode(err))
	got, ch, err = nc.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: evil.Public().String()})
	require.NoError(t, err, "a forgotten key is replaced by the next first key")
	assert.Nil(t, ch)
	assert.Equal(t, evil.KeyID(), got.KeyID)
	assert.Contains(t, objectEvents(t, tc, "node/node-a"), ReasonNodeKeyForgotten)

	// A wrong token registers nothing.
	bad := api.NewNodeClient("http://"+tc.APIAddr().String(), "node-a", "wrong", nil)
	_, _, err = bad.RegisterNodeKey(ctx, api.NodeKeyRequest{PublicKey: admin.Public().String()})
	require.ErrorIs(t, err, api.ErrUnauthorized)
}

// TestEnrollRegistersTheDeviceKey: the key a device sends with its
// enrollment code is registered; a malformed one is refused without
// using the code up.
func TestEnrollRegistersTheDeviceKey(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	code, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-7", TTL: "1h"})
	require.NoError(t, err)
	_, err = tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code, PublicKey: "x25519:nope"})
	assert.Equal(t, http.StatusBadRequest, statusCode(err))
	k, err := sealing.GenerateKey()
	require.NoError(t, err)
	_, err = tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code, PublicKey: k.Public().String()})
	require.NoError(t, err, "the malformed key did not use the code up")
	key, err := tc.api.GetNodeKey(ctx, "gw-7")
	require.NoError(t, err)
	assert.Equal(t, k.KeyID(), key.KeyID)
	assert.Equal(t, "enrollment", key.Source)
}

// TestStoreFileHoldsNoSecretPlaintext: the controller's store file holds
// a Secret encrypted, under the key derived from the fleet secret by
// default and under a key file's key when one is given; replacing the key
// file's key (the old one kept second) rewrites every record under the
// new key at start, after which the old one can go; a controller with
// the wrong key refuses to start.
func TestStoreFileHoldsNoSecretPlaintext(t *testing.T) {
	dir := t.TempDir()
	checkFile := func() {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "edgeset.db"))
		require.NoError(t, err)
		assert.False(t, bytes.Contains(b, []byte(secretValue)), "the store file holds the secret in the clear")
		assert.False(t, bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(secretValue)))),
			"the store file holds the secret in base64")
	}
	tc := startController(t, Config{DataDir: dir})
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}))
	tc.stop()
	checkFile()

	k1, k2 := bytes.Repeat([]byte{1}, datakey.KeySize), bytes.Repeat([]byte{2}, datakey.KeySize)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	writeKeys := func(keys ...[]byte) {
		var lines []string
		for _, k := range keys {
			lines = append(lines, base64.StdEncoding.EncodeToString(k))
		}
		require.NoError(t, os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	}
	valueAfterRestart := func(keys ...[]byte) string {
		t.Helper()
		writeKeys(keys...)
		tc := startController(t, Config{DataDir: dir, SecretEncryptionKeyFile: keyFile})
		defer tc.stop()
		got, err := tc.api.GetSecret(context.Background(), "edge/api-key", true)
		require.NoError(t, err)
		return string(got.Data["token"])
	}

	// Setting a key file: the records under the fleet key (held too, to
	// decrypt) are rewritten under the file's.
	assert.Equal(t, secretValue, valueAfterRestart(k1))
	checkFile()
	assert.Equal(t, secretValue, valueAfterRestart(k2, k1), "rotation: the new key first, the old kept")
	assert.Equal(t, secretValue, valueAfterRestart(k2), "after a start with both, the old key can go")
	checkFile()

	// A controller without the key of the records refuses to start.
	writeKeys(k1)
	_, err := New(Config{DataDir: dir, SecretEncryptionKeyFile: keyFile, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data key not held")
}

// TestSealedSecretIsSigned: with signing on, a node's Secret message is
// the sealed message in a signed envelope: it verifies for the node's
// topic, and its body opens with the node's key.
func TestSealedSecretIsSigned(t *testing.T) {
	tc := startController(t, Config{Signing: true})
	s := startSpy(t, tc)
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	ring := registerKey(t, tc, "node-a")
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false))
	topic, hash := secretTopicOf(t, a)
	st, err := tc.api.Signing(context.Background())
	require.NoError(t, err)
	pub, err := signing.ParsePublicKey(st.PublicKey)
	require.NoError(t, err)
	ks := &signing.KeySet{Version: 1, Keys: []signing.OnlineKey{{ID: st.KeyID, PublicKey: pub, Expires: time.Now().Add(time.Hour)}}}
	var env string
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		var ok bool
		if env, ok = s.last(topic); !ok {
			return fmt.Errorf("nothing on %s", topic)
		}
		return nil
	})
	statement, err := signing.Verify(ks, []byte(env), signing.Expect{Topic: topic, Node: "node-a"}, time.Now())
	require.NoError(t, err)
	sm, err := openSealed("node-a", hash, statement.Body, ring)
	require.NoError(t, err, "the signed body is the sealed message")
	assert.Equal(t, secretValue, string(sm.Secret.Data["token"]))
	assert.NotContains(t, string(statement.Body), base64.StdEncoding.EncodeToString([]byte(secretValue)))
}
