package signing

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const requestTopic = "edgeset/v1/nodes/a/exec/request"

func request(id string, issued time.Time) Statement {
	return Statement{Topic: requestTopic, Node: "a", IssuedAt: issued, ExpiresAt: issued.Add(RequestValidity),
		Body: json.RawMessage(`{"node":"a","id":"` + id + `"}`)}
}

func TestRequestGuardOpen(t *testing.T) {
	f := newFixture()
	exp := Expect{Topic: requestTopic, Node: "a"}
	start := t0.Add(-time.Hour)
	tooLong := request("r9", t0)
	tooLong.ExpiresAt = t0.Add(MaxRequestLifetime + time.Second)
	forOther := request("r8", t0)
	forOther.Node = "b"
	for _, tc := range []struct {
		name string
		env  []byte
		once bool
		now  time.Time
		want error // nil: accepted
	}{
		{"signed, in time", mustSign(t, f.online, request("r1", t0)), true, t0.Add(time.Second), nil},
		{"the same again", mustSign(t, f.online, request("r1", t0)), true, t0.Add(2 * time.Second), ErrReplay},
		{"the same signed again (another envelope, same statement)", mustSign(t, f.online, request("r1", t0)), true, t0, ErrReplay},
		{"another request", mustSign(t, f.online, request("r2", t0)), true, t0, nil},
		{"a chunk opened without once, twice", mustSign(t, f.online, request("c1", t0)), false, t0, nil},
		{"a chunk opened without once, again", mustSign(t, f.online, request("c1", t0)), false, t0, nil},
		{"expired", mustSign(t, f.online, request("r3", t0)), true, t0.Add(RequestValidity + time.Second), ErrExpired},
		{"valid for too long", mustSign(t, f.online, tooLong), true, t0, ErrMalformed},
		{"issued before the receiver started", mustSign(t, f.online, request("r4", start.Add(-time.Second))), true, start, ErrReplay},
		{"by an unknown key", mustSign(t, f.other, request("r5", t0)), true, t0, ErrUnknownKey},
		{"unsigned", []byte(`{"node":"a","id":"r6"}`), true, t0, ErrUnsigned},
		{"for another node", mustSign(t, f.online, forOther), true, t0, ErrWrongNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := guards[tc.once]
			_, err := g.Open(&f.ks, tc.env, exp, tc.now, tc.once)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// guards are TestRequestGuardOpen's, shared by its cases in order.
var guards = map[bool]*RequestGuard{true: NewRequestGuard(t0.Add(-time.Hour), 0), false: NewRequestGuard(t0.Add(-time.Hour), 0)}

// TestRequestGuardNeverAcceptsTwice drives a small guard with random
// requests, replays of them and a clock that jumps both ways: no
// statement is accepted twice and the guard never holds more than its
// bound.
func TestRequestGuardNeverAcceptsTwice(t *testing.T) {
	f := newFixture()
	exp := Expect{Topic: requestTopic, Node: "a"}
	for seed := uint64(0); seed < 10; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			const memory = 8
			g := NewRequestGuard(t0, memory)
			now := t0
			accepted := map[string]bool{}
			var sent [][]byte
			for i := range 300 {
				var env []byte
				switch r := rng.IntN(10); {
				case r < 4 && len(sent) > 0: // a replay of anything sent before
					env = sent[rng.IntN(len(sent))]
				case r < 5: // the clock jumps back
					now = now.Add(-time.Duration(rng.IntN(300)) * time.Second)
					continue
				default: // a fresh request, issued now, the clock moving on
					now = now.Add(time.Duration(1+rng.IntN(30_000)) * time.Millisecond)
					env = mustSign(t, f.online, request(fmt.Sprint("r", i), now))
					sent = append(sent, env)
				}
				_, err := g.Open(&f.ks, env, exp, now, true)
				require.LessOrEqual(t, g.Remembered(), memory)
				if err != nil {
					continue
				}
				require.False(t, accepted[string(env)], "step %d: a request accepted twice", i)
				accepted[string(env)] = true
			}
		})
	}
}

// TestRequestGuardLive: with the clock moving forward, every fresh
// request is accepted however many came before, the memory stays within
// its bound, and each replay is refused.
func TestRequestGuardLive(t *testing.T) {
	f := newFixture()
	exp := Expect{Topic: requestTopic, Node: "a"}
	const memory = 16
	g := NewRequestGuard(t0, memory)
	now := t0
	var recent [][]byte
	for i := range 200 {
		now = now.Add(time.Duration(1+i%7) * time.Second) // up to 7 s apart: many within one validity
		env := mustSign(t, f.online, request(fmt.Sprint("r", i), now))
		_, err := g.Open(&f.ks, env, exp, now, true)
		require.NoError(t, err, "fresh request %d", i)
		recent = append(recent, env)
		for _, old := range recent[max(0, len(recent)-3):] {
			_, err := g.Open(&f.ks, old, exp, now, true)
			require.ErrorIs(t, err, ErrReplay)
		}
		assert.LessOrEqual(t, g.Remembered(), memory)
	}
}

// BenchmarkRequestChunk measures what signing costs one keystroke of an
// interactive exec session: the controller signs its one-byte input
// chunk, the agent opens it (no replay memory for chunks). It reports the
// envelope's size besides the unsigned chunk's.
func BenchmarkRequestChunk(b *testing.B) {
	f := newFixture()
	s := NewSigner(f.online)
	const id = "5e0c1f2a3b4c5d6e7f8091a2b3c4d5e6"
	topic := "edgeset/v1/nodes/gw-0001/exec/input/" + id
	body := json.RawMessage(`{"schemaVersion":1,"node":"gw-0001","id":"` + id + `","seq":17,"data":"bA=="}`)
	g := NewRequestGuard(t0, 0)
	exp := Expect{Topic: topic, Node: "gw-0001"}
	var size int
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			env, err := s.Sign(Statement{Topic: topic, Node: "gw-0001", IssuedAt: t0, ExpiresAt: t0.Add(RequestValidity), Body: body})
			if err != nil {
				b.Fatal(err)
			}
			size = len(env)
		}
		b.ReportMetric(float64(size), "envelope-B")
		b.ReportMetric(float64(len(body)), "unsigned-B")
	})
	env, err := s.Sign(Statement{Topic: topic, Node: "gw-0001", IssuedAt: t0, ExpiresAt: t0.Add(RequestValidity), Body: body})
	require.NoError(b, err)
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Open(&f.ks, env, exp, t0, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
