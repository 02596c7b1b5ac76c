package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSignBatch: for every batch size, every envelope of the batch
// verifies on its own, for its own topic only, and a change to its index
// or its path makes it fail. (A size that leads the same path to the same
// signed root is the same proof: it is not mutated here.)
func TestSignBatch(t *testing.T) {
	f := newFixture()
	s := NewSigner(f.online)
	for _, size := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33, MaxBatch - 1, MaxBatch} {
		sts := make([]Statement, size)
		for i := range sts {
			sts[i] = statement(fmt.Sprintf("edgeset/v1/nodes/n%d/desired", i), fmt.Sprintf("n%d", i), uint64(i+1))
		}
		envs, err := s.SignBatch(sts)
		require.NoError(t, err)
		require.Len(t, envs, size)
		for i, env := range envs {
			exp := Expect{Topic: sts[i].Topic, Node: sts[i].Node}
			st, err := Verify(&f.ks, env, exp, t0)
			require.NoError(t, err, "size %d index %d", size, i)
			assert.Equal(t, sts[i].Generation, st.Generation)
			if size == 1 {
				continue
			}
			// Another envelope's topic: refused, though the batch is genuine.
			other := Expect{Topic: sts[(i+1)%size].Topic, Node: sts[(i+1)%size].Node}
			_, err = Verify(&f.ks, env, other, t0)
			require.Error(t, err)
			for _, mutate := range []func(*BatchProof){
				func(p *BatchProof) { p.Index = (p.Index + 1) % p.Size },
				func(p *BatchProof) { p.Size = 0 },
				func(p *BatchProof) { p.Path[0] = append([]byte{}, p.Path[0]...); p.Path[0][0] ^= 1 },
				func(p *BatchProof) { p.Path = p.Path[1:] },
				func(p *BatchProof) { p.Path = append(p.Path, p.Path[0]) },
			} {
				var e Envelope
				require.NoError(t, json.Unmarshal(env, &e))
				mutate(e.Signatures[0].Batch)
				b, _ := json.Marshal(e)
				_, err := Verify(&f.ks, b, exp, t0)
				require.ErrorIs(t, err, ErrBadSignature, "size %d index %d", size, i)
			}
		}
	}
	_, err := s.SignBatch(make([]Statement, MaxBatch+1))
	require.Error(t, err)
}

// TestBatchPayloadSwap: the payload of one batch member under another's
// proof does not verify.
func TestBatchPayloadSwap(t *testing.T) {
	f := newFixture()
	sts := []Statement{statement("t/a", "a", 1), statement("t/b", "b", 1), statement("t/c", "c", 1)}
	envs, err := NewSigner(f.online).SignBatch(sts)
	require.NoError(t, err)
	var a, b Envelope
	require.NoError(t, json.Unmarshal(envs[0], &a))
	require.NoError(t, json.Unmarshal(envs[1], &b))
	a.Payload = b.Payload
	swapped, _ := json.Marshal(a)
	_, err = Verify(&f.ks, swapped, Expect{Topic: "t/b", Node: "b"}, t0)
	require.ErrorIs(t, err, ErrBadSignature)
}

func BenchmarkSign(b *testing.B) {
	s := NewSigner(seededKey(2))
	st := statement("edgeset/v1/nodes/node-00042/desired", "node-00042", 7)
	b.Run("one", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Sign(st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch-of-64-per-envelope", func(b *testing.B) {
		sts := make([]Statement, MaxBatch)
		for i := range sts {
			sts[i] = st
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.SignBatch(sts); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBatch), "ns/envelope")
	})
}

// TestAppendersMatchEncodingJSON: the hand-written encoders write what
// encoding/json writes, so the strict decoder reads them.
func TestAppendersMatchEncodingJSON(t *testing.T) {
	st := statement("edgeset/v1/nodes/a/desired", "a", 42)
	st.IssuedAt = st.IssuedAt.Add(123456789)
	want, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(appendStatement(nil, st)))
	odd := Statement{Topic: "t/\"quoted\"\\é", Node: "\x01", Body: json.RawMessage(`{"a":1}`), IssuedAt: t0, ExpiresAt: t0}
	want, err = json.Marshal(odd)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(appendStatement(nil, odd)))

	p := &BatchProof{Index: 3, Size: 5, Path: [][]byte{make([]byte, 32), {1, 2, 3}}}
	env := Envelope{PayloadType: PayloadTypeDocument, Payload: []byte("xyz"), Signatures: []Signature{{KeyID: "k", Sig: []byte{9, 8}, Batch: p}}}
	want, err = json.Marshal(env)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(appendEnvelope(nil, env.PayloadType, env.Payload, "k", []byte{9, 8}, p)))
	env.Signatures[0].Batch = nil
	want, _ = json.Marshal(env)
	assert.Equal(t, string(want), string(appendEnvelope(nil, env.PayloadType, env.Payload, "k", []byte{9, 8}, nil)))
}

// TestAppendLengths: the sizes the signer allocates are exactly what the
// appenders write, so no envelope is copied while it is written.
func TestAppendLengths(t *testing.T) {
	for _, st := range []Statement{
		statement("edgeset/v1/nodes/a/desired", "a", 42),
		{Topic: "t", Node: AnyNode, Body: json.RawMessage(`{}`), IssuedAt: t0.Add(120 * time.Millisecond), ExpiresAt: t0.Add(time.Nanosecond)},
		{Topic: "t", Node: "n", Generation: math.MaxUint64, Body: json.RawMessage(`1`), IssuedAt: t0.Add(999999999), ExpiresAt: t0.Add(10 * time.Second)},
	} {
		b := appendStatement(nil, st)
		assert.Equal(t, len(b), statementLen(st), "%s", b)
	}
	payload := []byte("a payload of some length")
	for _, p := range []*BatchProof{
		nil,
		{Index: 0, Size: 2, Path: [][]byte{make([]byte, 32)}},
		{Index: 63, Size: 64, Path: [][]byte{make([]byte, 32), make([]byte, 32), make([]byte, 32)}},
		{Index: 4, Size: 5, Path: [][]byte{make([]byte, 32)}},
	} {
		for n := range 4 {
			b := appendEnvelope(nil, PayloadTypeDocument, payload[:len(payload)-n], "0123456789abcdef", make([]byte, 64), p)
			assert.Equal(t, len(b), envelopeLen(PayloadTypeDocument, payload[:len(payload)-n], "0123456789abcdef", make([]byte, 64), p), "%s", b)
		}
	}
}

func TestLeafHashIsOfPAE(t *testing.T) {
	payload := []byte(`{"x":1}`)
	want := sha256.Sum256(append([]byte{0}, PAE(PayloadTypeDocument, payload)...))
	assert.Equal(t, want, leafHash(PayloadTypeDocument, payload))
}

// BenchmarkVerify: what a device spends on one signed desired state of a
// batch of BatchSize, against the Ed25519 verification alone.
func BenchmarkVerify(b *testing.B) {
	f := newFixture()
	st := statement("edgeset/v1/nodes/node-00042/desired", "node-00042", 7)
	sts := make([]Statement, BatchSize)
	for i := range sts {
		sts[i] = st
	}
	envs, err := NewSigner(f.online).SignBatch(sts)
	if err != nil {
		b.Fatal(err)
	}
	exp := Expect{Topic: st.Topic, Node: st.Node}
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Verify(&f.ks, envs[1], exp, t0); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(envs[1])), "bytes")
	})
	b.Run("ed25519-alone", func(b *testing.B) {
		pub := f.online.Public().(ed25519.PublicKey)
		msg := PAE(PayloadTypeBatchRoot, make([]byte, 32))
		sig := ed25519.Sign(f.online, msg)
		for b.Loop() {
			ed25519.Verify(pub, msg, sig)
		}
	})
}
