package signing

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// seededKey returns a deterministic key for tests.
func seededKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

type fixture struct {
	root, online, other ed25519.PrivateKey
	ks                  KeySet
}

func newFixture() fixture {
	f := fixture{root: seededKey(1), online: seededKey(2), other: seededKey(3)}
	f.ks = KeySet{Version: 1, IssuedAt: t0, Keys: []OnlineKey{
		{ID: KeyID(pubOf(f.online)), PublicKey: pubOf(f.online), Expires: t0.Add(90 * 24 * time.Hour)},
	}}
	return f
}

func statement(topic, node string, gen uint64) Statement {
	return Statement{Topic: topic, Node: node, Generation: gen, IssuedAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
		Body: json.RawMessage(`{"node":"` + node + `","generation":1}`)}
}

func mustSign(t *testing.T, k ed25519.PrivateKey, st Statement) []byte {
	t.Helper()
	b, err := NewSigner(k).Sign(st)
	require.NoError(t, err)
	return b
}

func TestVerify(t *testing.T) {
	f := newFixture()
	const topic = "edgeset/v1/nodes/a/desired"
	exp := Expect{Topic: topic, Node: "a", MinGeneration: 5}
	revoked := f.ks
	revoked.Keys = nil
	revoked.Revoked = []string{KeyID(pubOf(f.online))}
	expiredKey := f.ks
	expiredKey.Keys = []OnlineKey{{ID: f.ks.Keys[0].ID, PublicKey: f.ks.Keys[0].PublicKey, Expires: t0.Add(time.Hour)}}
	tampered := mustSign(t, f.online, statement(topic, "a", 6))
	var e Envelope
	require.NoError(t, json.Unmarshal(tampered, &e))
	e.Payload = append([]byte(nil), e.Payload...)
	e.Payload[len(e.Payload)-3] ^= 1
	tampered, _ = json.Marshal(e)
	// a signature by the online key's ID made with another key
	impostor := mustSign(t, f.other, statement(topic, "a", 6))
	require.NoError(t, json.Unmarshal(impostor, &e))
	e.Signatures[0].KeyID = f.ks.Keys[0].ID
	impostor, _ = json.Marshal(e)

	cases := []struct {
		name string
		ks   *KeySet
		env  []byte
		exp  Expect
		now  time.Time
		want error
	}{
		{"valid", &f.ks, mustSign(t, f.online, statement(topic, "a", 6)), exp, t0, nil},
		{"same generation again", &f.ks, mustSign(t, f.online, statement(topic, "a", 5)), exp, t0, nil},
		{"shared revision", &f.ks, mustSign(t, f.online, statement("edgeset/v1/revisions/h", AnyNode, 0)),
			Expect{Topic: "edgeset/v1/revisions/h", Node: "a", Shared: true}, t0, nil},
		{"shared document where a node's is required", &f.ks, mustSign(t, f.online, statement(topic, AnyNode, 6)), exp, t0, ErrWrongNode},
		{"forged: unknown key", &f.ks, mustSign(t, f.other, statement(topic, "a", 6)), exp, t0, ErrUnknownKey},
		{"forged: known key ID, other key", &f.ks, impostor, exp, t0, ErrBadSignature},
		{"tampered payload", &f.ks, tampered, exp, t0, ErrBadSignature},
		{"no key set", nil, mustSign(t, f.online, statement(topic, "a", 6)), exp, t0, ErrUnknownKey},
		{"revoked key", &revoked, mustSign(t, f.online, statement(topic, "a", 6)), exp, t0, ErrRevokedKey},
		{"expired key", &expiredKey, mustSign(t, f.online, statement(topic, "a", 6)), exp, t0.Add(2 * time.Hour), ErrExpiredKey},
		{"replayed older generation", &f.ks, mustSign(t, f.online, statement(topic, "a", 4)), exp, t0, ErrRollback},
		{"cross-node", &f.ks, mustSign(t, f.online, statement("edgeset/v1/nodes/b/desired", "b", 6)), exp, t0, ErrWrongTopic},
		{"other node on this topic", &f.ks, mustSign(t, f.online, statement(topic, "b", 6)), exp, t0, ErrWrongNode},
		{"expired document", &f.ks, mustSign(t, f.online, statement(topic, "a", 6)), exp, t0.Add(25 * time.Hour), ErrExpired},
		{"unsigned", &f.ks, []byte(`{"schemaVersion":1,"node":"a","generation":9}`), exp, t0, ErrUnsigned},
		{"not JSON", &f.ks, []byte(`garbage`), exp, t0, ErrUnsigned},
		{"key set as a document", &f.ks, mustSignKeySet(t, f.root, f.ks), exp, t0, ErrMalformed},
		{"no signatures", &f.ks, []byte(`{"payloadType":"` + PayloadTypeDocument + `","payload":"e30=","signatures":[]}`), exp, t0, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Verify(tc.ks, tc.env, tc.exp, tc.now)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.exp.Topic, st.Topic)
				return
			}
			require.ErrorIs(t, err, tc.want)
			assert.NotEqual(t, "SignedDocumentRefused", Reason(err))
		})
	}
}

func mustSignKeySet(t *testing.T, root ed25519.PrivateKey, ks KeySet) []byte {
	t.Helper()
	b, err := SignKeySet(root, ks)
	require.NoError(t, err)
	return b
}

func TestTrustAcceptKeySet(t *testing.T) {
	f := newFixture()
	v1 := mustSignKeySet(t, f.root, f.ks)
	ks2 := f.ks
	ks2.Version = 2
	ks2.Keys = nil
	ks2.Revoked = []string{f.ks.Keys[0].ID}
	v2 := mustSignKeySet(t, f.root, ks2)
	other1 := f.ks
	other1.IssuedAt = t0.Add(time.Minute)

	tr := NewTrust(pubOf(f.root))
	changed, err := tr.AcceptKeySet(v1)
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = tr.AcceptKeySet(v1)
	require.NoError(t, err)
	assert.False(t, changed, "the same key set again changes nothing")

	_, err = tr.AcceptKeySet(mustSignKeySet(t, f.other, ks2))
	require.ErrorIs(t, err, ErrNotRoot)
	_, err = tr.AcceptKeySet(mustSignKeySet(t, f.root, other1))
	require.ErrorIs(t, err, ErrDowngrade, "another set of the same version")

	changed, err = tr.AcceptKeySet(v2)
	require.NoError(t, err)
	assert.True(t, changed)
	_, err = tr.AcceptKeySet(v1)
	require.ErrorIs(t, err, ErrDowngrade)
	assert.Equal(t, uint64(2), tr.KeySet.Version)

	restored := NewTrust(pubOf(f.root))
	require.NoError(t, restored.Restore(tr.Envelope))
	assert.Equal(t, *tr.KeySet, *restored.KeySet)
	require.Error(t, NewTrust(pubOf(f.other)).Restore(tr.Envelope), "a persisted set is verified again")
}

func TestKeySetValidate(t *testing.T) {
	f := newFixture()
	k := f.ks.Keys[0]
	cases := []struct {
		name string
		ks   KeySet
		want string
	}{
		{"valid", f.ks, ""},
		{"no version", KeySet{Keys: f.ks.Keys}, "version"},
		{"wrong id", KeySet{Version: 1, Keys: []OnlineKey{{ID: KeyID(pubOf(f.other)), PublicKey: k.PublicKey, Expires: k.Expires}}}, "keys[0].id"},
		{"short key", KeySet{Version: 1, Keys: []OnlineKey{{ID: k.ID, PublicKey: k.PublicKey[:5], Expires: k.Expires}}}, "keys[0].publicKey"},
		{"twice", KeySet{Version: 1, Keys: []OnlineKey{k, k}}, "listed twice"},
		{"listed and revoked", KeySet{Version: 1, Keys: []OnlineKey{k}, Revoked: []string{k.ID}}, "also revoked"},
		{"no expiry", KeySet{Version: 1, Keys: []OnlineKey{{ID: k.ID, PublicKey: k.PublicKey}}}, "keys[0].expires"},
		{"bad revoked id", KeySet{Version: 1, Revoked: []string{"x"}}, "revoked[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ks.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestVerifyRefusesEveryBitFlip: flipping any one byte of a signed
// envelope makes it fail to verify, or leaves it meaning the same (a
// byte of JSON syntax that decodes alike is not possible here: every
// flip either breaks the JSON, the base64, or the signed bytes).
func TestVerifyRefusesEveryBitFlip(t *testing.T) {
	f := newFixture()
	const topic = "edgeset/v1/nodes/a/desired"
	env := mustSign(t, f.online, statement(topic, "a", 6))
	want, err := Verify(&f.ks, env, Expect{Topic: topic, Node: "a"}, t0)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := append([]byte(nil), env...)
		i := rng.IntN(len(b))
		b[i] ^= byte(1 + rng.IntN(255))
		got, err := Verify(&f.ks, b, Expect{Topic: topic, Node: "a"}, t0)
		if err == nil {
			// Only a change the decoders fold (a key's letter case) may pass,
			// and then it must mean exactly the same.
			assert.Equal(t, want, got, "byte %d flipped", i)
		}
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k := seededKey(7)
	path := filepath.Join(dir, "root.key")
	require.NoError(t, WritePrivateKeyFile(path, k))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	got, err := ReadPrivateKeyFile(path)
	require.NoError(t, err)
	assert.True(t, k.Equal(got))
	require.Error(t, WritePrivateKeyFile(path, k), "never overwrites")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = ReadPrivateKeyFile(path)
	require.ErrorContains(t, err, "chmod 600")

	pubPath := filepath.Join(dir, "root.pub")
	require.NoError(t, WritePublicKeyFile(pubPath, pubOf(k)))
	pem, err := os.ReadFile(pubPath)
	require.NoError(t, err)
	for _, s := range []string{string(pem), FormatPublicKey(pubOf(k))} {
		pub, err := ParsePublicKey(s)
		require.NoError(t, err)
		assert.True(t, pubOf(k).Equal(pub))
	}
	for _, bad := range []string{"", "ed25519:", "ed25519:AAAA", "rsa:abc", "-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----"} {
		_, err := ParsePublicKey(bad)
		require.Error(t, err, bad)
	}
}

func TestReasonsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		assert.False(t, seen[r], r)
		seen[r] = true
	}
	assert.Equal(t, "SignedDocumentRefused", Reason(errors.New("other")))
}

func FuzzVerify(f *testing.F) {
	fx := newFixture()
	const topic = "edgeset/v1/nodes/a/desired"
	good, _ := NewSigner(fx.online).Sign(statement(topic, "a", 6))
	ks, _ := SignKeySet(fx.root, fx.ks)
	f.Add(good)
	f.Add(ks)
	f.Add([]byte(`{"payloadType":"x","payload":"","signatures":[{"keyid":"","sig":""}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Verify(&fx.ks, b, Expect{Topic: topic, Node: "a"}, t0)
		if err == nil {
			// Anything accepted was signed by the online key for this topic.
			if st.Topic != topic || st.Node != "a" {
				t.Fatalf("accepted a statement for %s/%s", st.Topic, st.Node)
			}
		}
		tr := NewTrust(pubOf(fx.root))
		if _, err := tr.AcceptKeySet(b); err == nil && tr.KeySet.Validate() != nil {
			t.Fatal("accepted an invalid key set")
		}
	})
}
