package signing

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSignatureCacheSharesABatch: the envelopes of one batch share its
// signature, so receivers sharing a cache verify it once; each envelope is
// still checked for its own topic and node.
func TestSignatureCacheSharesABatch(t *testing.T) {
	f := newFixture()
	sts := make([]Statement, BatchSize)
	for i := range sts {
		sts[i] = statement(fmt.Sprintf("edgeset/v1/nodes/n%d/desired", i), fmt.Sprintf("n%d", i), 3)
	}
	envs, err := NewSigner(f.online).SignBatch(sts)
	require.NoError(t, err)
	c := NewSignatureCache(16)
	v := Verifier{Cache: c}
	for i, env := range envs {
		st, err := v.Verify(&f.ks, env, Expect{Topic: sts[i].Topic, Node: sts[i].Node}, t0)
		require.NoError(t, err)
		assert.Equal(t, sts[i].Node, st.Node)
	}
	hits, misses, size := c.Stats()
	assert.Equal(t, [3]any{uint64(BatchSize - 1), uint64(1), 1}, [3]any{hits, misses, size})

	// A member received by another node: the signature is known, the
	// document is still not that node's.
	_, err = v.Verify(&f.ks, envs[0], Expect{Topic: sts[1].Topic, Node: sts[1].Node}, t0)
	require.ErrorIs(t, err, ErrWrongTopic)
	_, err = v.Verify(&f.ks, envs[0], Expect{Topic: sts[0].Topic, Node: sts[0].Node, MinGeneration: 4}, t0)
	require.ErrorIs(t, err, ErrRollback)
	_, err = v.Verify(&f.ks, envs[0], Expect{Topic: sts[0].Topic, Node: sts[0].Node}, t0.Add(25*time.Hour))
	require.ErrorIs(t, err, ErrExpired)
}

// TestSignatureCacheKeepsKeyChecks: a signature the cache holds is
// refused once its key is revoked, expired or gone from the key set.
func TestSignatureCacheKeepsKeyChecks(t *testing.T) {
	f := newFixture()
	const topic = "edgeset/v1/nodes/a/desired"
	env := mustSign(t, f.online, statement(topic, "a", 6))
	exp := Expect{Topic: topic, Node: "a"}
	v := Verifier{Cache: NewSignatureCache(16)}
	_, err := v.Verify(&f.ks, env, exp, t0)
	require.NoError(t, err)

	revoked := f.ks
	revoked.Version, revoked.Keys, revoked.Revoked = 2, nil, []string{KeyID(pubOf(f.online))}
	_, err = v.Verify(&revoked, env, exp, t0)
	require.ErrorIs(t, err, ErrRevokedKey)

	other := f.ks
	other.Version, other.Keys = 2, []OnlineKey{{ID: KeyID(pubOf(f.other)), PublicKey: pubOf(f.other), Expires: t0.Add(time.Hour)}}
	_, err = v.Verify(&other, env, exp, t0)
	require.ErrorIs(t, err, ErrUnknownKey)

	_, err = v.Verify(&f.ks, env, exp, t0.Add(91*24*time.Hour))
	require.Error(t, err, "the key has expired (and so has the document)")
}

// TestSignatureCacheRefusesEveryBitFlip: with the genuine envelope's
// signature in the cache, no one-byte change of it verifies to anything
// else, as without a cache (TestVerifyRefusesEveryBitFlip), and nothing
// that failed is remembered.
func TestSignatureCacheRefusesEveryBitFlip(t *testing.T) {
	f := newFixture()
	const topic = "edgeset/v1/nodes/a/desired"
	env := mustSign(t, f.online, statement(topic, "a", 6))
	c := NewSignatureCache(16)
	v := Verifier{Cache: c}
	want, err := v.Verify(&f.ks, env, Expect{Topic: topic, Node: "a"}, t0)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		b := append([]byte(nil), env...)
		i := rng.IntN(len(b))
		b[i] ^= byte(1 + rng.IntN(255))
		got, err := v.Verify(&f.ks, b, Expect{Topic: topic, Node: "a"}, t0)
		if err == nil {
			assert.Equal(t, want, got, "byte %d flipped", i)
		}
	}
	_, _, size := c.Stats()
	assert.Equal(t, 1, size, "only the genuine signature is held")
}

// TestSignatureCacheBounded: the cache never holds more than its size,
// and a signature it forgot verifies again.
func TestSignatureCacheBounded(t *testing.T) {
	f := newFixture()
	c := NewSignatureCache(3)
	v := Verifier{Cache: c}
	var envs [][]byte
	for i := range 10 {
		topic := fmt.Sprintf("edgeset/v1/nodes/n%d/desired", i)
		envs = append(envs, mustSign(t, f.online, statement(topic, fmt.Sprintf("n%d", i), 1)))
	}
	for round := range 2 {
		for i, env := range envs {
			_, err := v.Verify(&f.ks, env, Expect{Topic: fmt.Sprintf("edgeset/v1/nodes/n%d/desired", i), Node: fmt.Sprintf("n%d", i)}, t0)
			require.NoError(t, err, "round %d envelope %d", round, i)
			_, _, size := c.Stats()
			require.LessOrEqual(t, size, 3)
		}
	}
	hits, misses, _ := c.Stats()
	assert.Equal(t, uint64(20), hits+misses)
	assert.GreaterOrEqual(t, misses, uint64(10+7), "at most three of the second round were still held")
}

// BenchmarkVerifyShared: a device's verification of a batch member whose
// signature another device sharing the cache verified first (the
// simulator's case), against BenchmarkVerify's.
func BenchmarkVerifyShared(b *testing.B) {
	f := newFixture()
	st := statement("edgeset/v1/nodes/node-00042/desired", "node-00042", 7)
	envs, err := NewSigner(f.online).SignBatch([]Statement{st, st, st, st})
	if err != nil {
		b.Fatal(err)
	}
	v := Verifier{Cache: NewSignatureCache(16)}
	exp := Expect{Topic: st.Topic, Node: st.Node}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(&f.ks, envs[1], exp, t0); err != nil {
			b.Fatal(err)
		}
	}
}
