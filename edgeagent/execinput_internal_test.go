package edgeagent

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func seqs(in []schema.ExecInput) []int {
	out := []int{}
	for _, m := range in {
		out = append(out, m.Seq)
	}
	return out
}

func TestInputSequencer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		arrive []int
		max    int
		want   [][]int // handed out after each arrival
		lostAt int     // index of the arrival that fails; -1 none
	}{
		{"in order", []int{0, 1, 2}, 4, [][]int{{0}, {1}, {2}}, -1},
		{"one early", []int{1, 0, 2}, 4, [][]int{{}, {0, 1}, {2}}, -1},
		{"reversed", []int{3, 2, 1, 0}, 4, [][]int{{}, {}, {}, {0, 1, 2, 3}}, -1},
		{"repeats dropped", []int{0, 0, 2, 2, 1, 1, 0}, 4, [][]int{{0}, {}, {}, {}, {1, 2}, {}, {}}, -1},
		{"window full: lost", []int{1, 2, 3}, 2, [][]int{{}, {}, nil}, 2},
		{"a repeat of a held one does not count", []int{2, 2, 2, 0, 1}, 1, [][]int{{}, {}, {}, {0}, {1, 2}}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newInputSequencer(tt.max)
			for i, seq := range tt.arrive {
				got, err := q.accept(schema.ExecInput{Seq: seq})
				if i == tt.lostAt {
					require.ErrorIs(t, err, errInputLost)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tt.want[i], seqs(got), "after arrival %d (seq %d)", i, seq)
			}
		})
	}
}

// TestInputSequencerProperty: whatever order and repeats chunks come in,
// as long as no more than max are early at once, every chunk is handed
// out exactly once, in order.
func TestInputSequencerProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 2))
	for run := range 500 {
		n, window := 1+rng.IntN(200), 1+rng.IntN(16)
		// Each chunk arrives (once or twice) at most window places away
		// from its place.
		var arrivals []int
		for i := range n {
			arrivals = append(arrivals, i)
			if rng.IntN(4) == 0 {
				arrivals = append(arrivals, i) // a redelivery
			}
		}
		for i := range arrivals {
			j := min(len(arrivals)-1, i+rng.IntN(window))
			arrivals[i], arrivals[j] = arrivals[j], arrivals[i]
		}
		q := newInputSequencer(2 * len(arrivals))
		var out []int
		for _, seq := range arrivals {
			got, err := q.accept(schema.ExecInput{Seq: seq})
			require.NoError(t, err, "run %d", run)
			out = append(out, seqs(got)...)
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, out, "run %d: arrivals %v", run, arrivals)
		assert.Empty(t, q.held, "run %d: nothing left held", run)
	}
}
