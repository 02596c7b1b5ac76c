package sealing

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func mustKey(t testing.TB) *PrivateKey {
	t.Helper()
	k, err := GenerateKey()
	require.NoError(t, err)
	return k
}

const (
	testNode = "gw-1"
	testHash = "4ea255dad47eec22391f"
)

var plaintext = []byte(`{"schemaVersion":1,"node":"gw-1","hash":"4ea255dad47eec22391f","secret":{"data":{"token":"czNjcjN0"}}}`)

func TestSealedSecretOpensOnlyAsItsOwnObject(t *testing.T) {
	mine, other := mustKey(t), mustKey(t)
	box, err := SealSecret(mine.Public(), testNode, testHash, plaintext)
	require.NoError(t, err)
	assert.Equal(t, schema.SealSuite, box.Suite)
	assert.Equal(t, mine.KeyID(), box.KeyID)
	assert.False(t, bytes.Contains(box.Ciphertext, []byte("czNjcjN0")), "the ciphertext does not carry the plaintext")

	got, err := Keyring{Current: mine}.OpenSecret(testNode, testHash, box)
	require.NoError(t, err)
	assert.Equal(t, plaintext, got)

	tampered := box
	tampered.Ciphertext = bytes.Clone(box.Ciphertext)
	tampered.Ciphertext[len(tampered.Ciphertext)-1] ^= 1
	otherKeyID := box
	otherKeyID.KeyID = other.KeyID()
	for _, tc := range []struct {
		name       string
		ring       Keyring
		node, hash string
		box        schema.SealedBox
		want       error
	}{
		{"another node's key", Keyring{Current: other}, testNode, testHash, box, ErrNotForKey},
		{"another node's key, the box relabelled", Keyring{Current: other}, testNode, testHash, otherKeyID, ErrOpen},
		{"replayed on another node's topic", Keyring{Current: mine}, "gw-2", testHash, box, ErrOpen},
		{"replayed on another hash's topic", Keyring{Current: mine}, testNode, "00000000000000000000", box, ErrOpen},
		{"altered on the way", Keyring{Current: mine}, testNode, testHash, tampered, ErrOpen},
		{"another suite", Keyring{Current: mine}, testNode, testHash, schema.SealedBox{Suite: "x", KeyID: box.KeyID, Ciphertext: box.Ciphertext}, ErrBox},
		{"too short", Keyring{Current: mine}, testNode, testHash, schema.SealedBox{Suite: box.Suite, KeyID: box.KeyID, Ciphertext: box.Ciphertext[:40]}, ErrBox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.ring.OpenSecret(tc.node, tc.hash, tc.box)
			require.ErrorIs(t, err, tc.want)
			assert.NotContains(t, err.Error(), "czNjcjN0")
		})
	}
}

func TestProofChallengeOpensOnlyWithTheRegisteredKey(t *testing.T) {
	macKey := []byte("controller-secret-controller-secret")
	old, next, stranger := mustKey(t), mustKey(t), mustKey(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	box, err := SealChallenge(macKey, testNode, old.Public(), next.Public(), now)
	require.NoError(t, err)

	_, err = Keyring{Current: next}.OpenChallenge(testNode, next.Public(), box)
	require.ErrorIs(t, err, ErrNotForKey, "the new key alone cannot answer")
	answer, err := Keyring{Current: next, Previous: old}.OpenChallenge(testNode, next.Public(), box)
	require.NoError(t, err)
	require.NoError(t, CheckProof(macKey, testNode, old.Public(), next.Public(), answer, now.Add(time.Minute)))

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"expired", CheckProof(macKey, testNode, old.Public(), next.Public(), answer, now.Add(ProofLifetime))},
		{"for another node", CheckProof(macKey, "gw-2", old.Public(), next.Public(), answer, now)},
		{"for another new key", CheckProof(macKey, testNode, old.Public(), stranger.Public(), answer, now)},
		{"under another controller's key", CheckProof([]byte("another"), testNode, old.Public(), next.Public(), answer, now)},
		{"truncated", CheckProof(macKey, testNode, old.Public(), next.Public(), answer[:10], now)},
	} {
		t.Run(tc.name, func(t *testing.T) { require.ErrorIs(t, tc.err, ErrProof) })
	}
	_, err = Keyring{Current: stranger, Previous: old}.OpenChallenge(testNode, stranger.Public(), box)
	require.ErrorIs(t, err, ErrOpen, "a challenge for one new key does not open as one for another")
}

func TestKeyFileRoundTripAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", KeyFile)
	r, created, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	require.True(t, created)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again, created, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, r.Current.KeyID(), again.Current.KeyID())
	assert.Nil(t, again.Previous)

	rotated, err := r.Rotate()
	require.NoError(t, err)
	require.NoError(t, WriteKeyFile(path, rotated))
	read, err := ReadKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, rotated.Current.KeyID(), read.Current.KeyID())
	assert.Equal(t, r.Current.KeyID(), read.Previous.KeyID())
	assert.NotEqual(t, read.Current.KeyID(), read.Previous.KeyID())

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = ReadKeyFile(path)
	require.ErrorContains(t, err, "chmod 600")
}

func TestParseKeyringRefusesWhatIsNotOne(t *testing.T) {
	k := mustKey(t)
	one, err := MarshalKeyring(Keyring{Current: k})
	require.NoError(t, err)
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no current"},
		{"two current keys", string(one) + string(one), "a second current key"},
		{"another block", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", `PEM type "PUBLIC KEY"`},
		{"not a key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeyring([]byte(tc.in))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestPublicKeyText(t *testing.T) {
	k := mustKey(t)
	s := k.Public().String()
	assert.Regexp(t, `^x25519:[A-Za-z0-9+/]{43}=$`, s)
	p, err := ParsePublicKey(s)
	require.NoError(t, err)
	assert.True(t, p.Equal(k.Public()))
	assert.Len(t, p.KeyID(), KeyIDLength)
	for _, bad := range []string{"", "ed25519:AAAA", "x25519:!!", "x25519:AAAA"} {
		_, err := ParsePublicKey(bad)
		assert.ErrorIs(t, err, ErrKey, bad)
	}
}

func BenchmarkSealSecret(b *testing.B) {
	k := mustKey(b)
	pub := k.Public()
	msg := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SealSecret(pub, testNode, testHash, msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenSecret(b *testing.B) {
	k := mustKey(b)
	box, err := SealSecret(k.Public(), testNode, testHash, bytes.Repeat([]byte("x"), 1024))
	require.NoError(b, err)
	ring := Keyring{Current: k}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.OpenSecret(testNode, testHash, box); err != nil {
			b.Fatal(err)
		}
	}
}
