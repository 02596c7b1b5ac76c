package schema

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuantityValues(t *testing.T) {
	tests := []struct {
		in    Quantity
		value int64
		milli int64
	}{
		{"0", 0, 0},
		{"1", 1, 1000},
		{"100m", 1, 100},
		{"0.5", 1, 500},
		{".5", 1, 500},
		{"1.5", 2, 1500},
		{"250m", 1, 250},
		{"1k", 1000, 1_000_000},
		{"2M", 2_000_000, 2_000_000_000},
		{"1G", 1_000_000_000, 1_000_000_000_000},
		{"1T", 1_000_000_000_000, 1_000_000_000_000_000},
		{"1P", 1_000_000_000_000_000, 1_000_000_000_000_000_000},
		{"200Mi", 200 << 20, 200 << 20 * 1000},
		{"1Ki", 1024, 1_024_000},
		{"1.5Gi", 3 << 29, 3 << 29 * 1000},
		{"1Ti", 1 << 40, 1 << 40 * 1000},
		{"1Pi", 1 << 50, 1 << 50 * 1000},
		{"1Ei", 1 << 60, -1},
		{"1E", 1_000_000_000_000_000_000, -1},
		{"1e3", 1000, 1_000_000},
		{"5E-1", 1, 500},
		{"1e+2", 100, 100_000},
		{"+2", 2, 2000},
		{"-1", -1, -1000},
		{"1n", 1, 1},
		{"1u", 1, 1},
		{"3.0001", 4, 3001},
	}
	for _, tc := range tests {
		t.Run(string(tc.in), func(t *testing.T) {
			v, err := tc.in.Value()
			require.NoError(t, err)
			assert.Equal(t, tc.value, v, "Value")
			m, err := tc.in.MilliValue()
			if tc.milli < 0 && tc.value > 0 {
				assert.ErrorContains(t, err, "out of range", "MilliValue overflows")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.milli, m, "MilliValue")
		})
	}
}

func TestQuantityErrors(t *testing.T) {
	for _, in := range []Quantity{"", "m", "Mi", "1Gb", "1.2.3", "abc", "1 Mi", "-", ".", "1e", "1e1.5", "1e999", "1ii", "10Ei"} {
		t.Run(string(in), func(t *testing.T) {
			_, err := in.Value()
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", string(in)), "the error names the quantity")
		})
	}
}

// TestQuantitySuffixProperty checks, for random integers, that every suffix
// scales the value by its multiplier.
func TestQuantitySuffixProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mult := map[string]int64{"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
	for range 500 {
		n := rng.Int64N(1000)
		for suffix, m := range mult {
			q := Quantity(fmt.Sprintf("%d%s", n, suffix))
			v, err := q.Value()
			require.NoError(t, err, q)
			require.Equal(t, n*m, v, q)
			mv, err := q.MilliValue()
			require.NoError(t, err, q)
			require.Equal(t, n*m*1000, mv, q)
		}
		milli := Quantity(fmt.Sprintf("%dm", n))
		mv, err := milli.MilliValue()
		require.NoError(t, err)
		require.Equal(t, n, mv, milli)
	}
}
