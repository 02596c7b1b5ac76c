package edgeagent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunHistory: the agent learns a container's previous run from what
// its passes see, places the start of a run's log between the end of the
// run before and its own start (a moment before its start when it did not
// see the end), and forgets containers that are gone.
func TestRunHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	h := newRunHistory()
	h.observe([]ContainerState{{ID: "a", Running: true, StartedAt: t0}, {ID: "b"}})
	_, ok := h.previousRunSince("a", t0)
	assert.False(t, ok, "one run seen: no previous one")
	assert.Equal(t, t0.Add(-runStartSlack), h.lastRunSince("a", t0))

	// Run 0 exits at t1-300ms; run 1 starts at t1 (a liveness restart:
	// no back-off between them).
	h.observe([]ContainerState{{ID: "a", StartedAt: t0, FinishedAt: t1.Add(-300 * time.Millisecond)}})
	h.observe([]ContainerState{{ID: "a", Running: true, StartedAt: t1, FinishedAt: t1.Add(-300 * time.Millisecond)}})
	h.observe([]ContainerState{{ID: "a", Running: true, StartedAt: t1, FinishedAt: t1.Add(-300 * time.Millisecond)}})
	got, ok := h.previousRunSince("a", t1)
	require.True(t, ok)
	assert.Equal(t, t0.Add(-runStartSlack), got, "the same run seen twice is one run")
	assert.Equal(t, t1.Add(-150*time.Millisecond), h.lastRunSince("a", t1), "between the end of the run before and its start")
	_, ok = h.previousRunSince("a", t2)
	assert.False(t, ok, "asked about a run it has not seen")

	h.observe([]ContainerState{{ID: "a", Running: true, StartedAt: t2, FinishedAt: t2.Add(-time.Minute / 2)}})
	got, _ = h.previousRunSince("a", t2)
	assert.Equal(t, t1.Add(-150*time.Millisecond), got)

	h.observe(nil)
	_, ok = h.previousRunSince("a", t2)
	assert.False(t, ok, "a removed container is forgotten")
}

// TestPreviousRunOptions: --previous selects exactly the last terminated
// run, up to its boundary with the current run, from where the agent knows its log begins
// (every earlier run where it does not know).
func TestPreviousRunOptions(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	known := func(id string, current time.Time) (time.Time, bool) { return t0, id == "a" && current.Equal(t1) }
	tests := []struct {
		name string
		c    ContainerState
		want LogOptions
	}{
		{"exited: its last run", ContainerState{ID: "a", StartedAt: t1, FinishedAt: t1.Add(time.Second)}, LogOptions{Since: t1.Add(-runStartSlack)}},
		{"restarted, previous run known", ContainerState{ID: "a", Running: true, StartedAt: t1, FinishedAt: t1.Add(-time.Second)},
			LogOptions{Since: t0, Until: t1.Add(-time.Second / 2)}},
		{"restarted, previous run unknown", ContainerState{ID: "b", Running: true, StartedAt: t1, FinishedAt: t1.Add(-time.Second)},
			LogOptions{Until: t1.Add(-time.Second / 2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := previousRun(tc.c, LogOptions{Follow: true}, known)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := previousRun(ContainerState{ID: "a", Running: true, StartedAt: t1}, LogOptions{}, known)
	assert.ErrorContains(t, err, "no terminated run")
}
