package selfupdate

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errCrash = errors.New("crash")

// crashAfter is a swapper hook that stops after step, as a crash (power
// cut, kill -9) there would.
func crashAfter(step string) func(string) error {
	return func(s string) error {
		if s == step {
			return errCrash
		}
		return nil
	}
}

// installed sets up a directory with agent v1 at the binary's path and a
// downloaded v2, and returns its paths, the builds and the record an
// install writes.
func installed(t *testing.T) (Paths, string, Record) {
	p := PathsOf(filepath.Join(t.TempDir(), "edgeset-agent"))
	v1 := fakeAgent(t, p.Binary, "v1", RecordFormat)
	candidate := filepath.Join(p.Downloads, "blobs", "new")
	v2 := fakeAgent(t, candidate, "v2", RecordFormat)
	return p, candidate, Record{From: v1, To: v2, Revision: "r2", MaxAttempts: 3, DeadlineSeconds: 60}
}

// TestInstallCrashBetweenSteps crashes an install after each of its steps
// and restarts: a runnable binary is always in place, and the next start
// either runs v1 with no trial (the install is redone later) or starts v2
// on trial.
func TestInstallCrashBetweenSteps(t *testing.T) {
	cases := []struct {
		crash     string
		wantRun   string
		wantTrial bool
	}{
		{crash: stepPrevious, wantRun: "v1"},
		{crash: stepRecord, wantRun: "v1"},
		{crash: stepSwap, wantRun: "v2", wantTrial: true},
		{crash: "", wantRun: "v2", wantTrial: true},
	}
	for _, tc := range cases {
		t.Run("after "+tc.crash, func(t *testing.T) {
			p, candidate, rec := installed(t)
			s := swapper{p: p, after: crashAfter(tc.crash)}
			err := s.install(candidate, rec)
			if tc.crash != "" {
				require.ErrorIs(t, err, errCrash)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantRun, versionAt(t, p.Binary))
			boot, err := restart(t, p)
			require.NoError(t, err)
			assert.Equal(t, tc.wantRun, versionAt(t, p.Binary))
			if !tc.wantTrial {
				assert.Nil(t, boot.Trial)
				assert.False(t, exists(p.Record), "a record that does not concern v1 is removed")
				return
			}
			require.NotNil(t, boot.Trial)
			assert.Equal(t, 1, boot.Trial.Attempts)
			assert.Equal(t, "v1", versionAt(t, p.Previous), "the replaced binary is kept to return to")
		})
	}
}

// TestRollBackCrashBetweenSteps crashes a rollback after each of its
// steps and restarts (as often as the starts ask): a runnable binary is
// always in place, and the agent ends on v1 with the rollback recorded.
func TestRollBackCrashBetweenSteps(t *testing.T) {
	for _, crash := range []string{stepRollingBack, stepRestore, stepRolledBack, ""} {
		t.Run("after "+crash, func(t *testing.T) {
			p, candidate, rec := installed(t)
			require.NoError(t, swapper{p: p}.install(candidate, rec))
			boot, err := restart(t, p)
			require.NoError(t, err)
			require.NotNil(t, boot.Trial)
			trial := *boot.Trial
			trial.Reason = "did not connect"
			err = swapper{p: p, after: crashAfter(crash)}.rollBack(trial)
			if crash != "" {
				require.ErrorIs(t, err, errCrash)
			} else {
				require.NoError(t, err)
			}
			assert.Contains(t, []string{"v1", "v2"}, versionAt(t, p.Binary))
			for range 3 {
				if boot, err = restart(t, p); !errors.Is(err, ErrRestart) {
					break
				}
			}
			require.NoError(t, err)
			assert.Equal(t, "v1", versionAt(t, p.Binary))
			require.NotNil(t, boot.Rejected, "v1 knows v2 was rolled back")
			assert.Equal(t, "v2", boot.Rejected.To.Version)
			assert.Equal(t, "did not connect", boot.Rejected.Reason)
			assert.Nil(t, boot.Trial)
		})
	}
}

// TestCrashLoopRollsBack: a binary on trial that never confirms is
// started MaxAttempts times; the start after that returns to v1, which
// then knows why.
func TestCrashLoopRollsBack(t *testing.T) {
	p, candidate, rec := installed(t)
	require.NoError(t, swapper{p: p}.install(candidate, rec))
	for i := 1; i <= rec.MaxAttempts; i++ {
		boot, err := restart(t, p)
		require.NoError(t, err)
		require.NotNil(t, boot.Trial, "start %d", i)
		assert.Equal(t, i, boot.Trial.Attempts)
		assert.Equal(t, "v2", versionAt(t, p.Binary))
		// ... and the binary crashes before it confirms.
	}
	_, err := restart(t, p)
	require.ErrorIs(t, err, ErrRestart, "the start past the last attempt rolls back")
	assert.Equal(t, "v1", versionAt(t, p.Binary))
	boot, err := restart(t, p)
	require.NoError(t, err)
	require.NotNil(t, boot.Rejected)
	assert.Contains(t, boot.Rejected.Reason, "started 3 times without connecting")
	assert.False(t, exists(p.Previous), "the rollback moved the previous binary back into place")
}

// TestRollBackWithoutPrevious: with no previous binary to return to (it
// was removed by hand), the binary on trial keeps running rather than
// leave the device without an agent.
func TestRollBackWithoutPrevious(t *testing.T) {
	p, candidate, rec := installed(t)
	rec.MaxAttempts = 1
	require.NoError(t, swapper{p: p}.install(candidate, rec))
	_, err := restart(t, p)
	require.NoError(t, err)
	require.NoError(t, removeFile(p.Previous))
	boot, err := restart(t, p)
	require.NoError(t, err, "nothing to roll back to: it runs")
	assert.Nil(t, boot.Trial)
	assert.Equal(t, "v2", versionAt(t, p.Binary))
	assert.False(t, exists(p.Record))
}

// TestUnreadableRecord: a damaged record is removed and the agent runs.
func TestUnreadableRecord(t *testing.T) {
	p, _, _ := installed(t)
	require.NoError(t, writeFile(p.Record, "{not json"))
	boot, err := restart(t, p)
	require.NoError(t, err)
	assert.Nil(t, boot.Trial)
	assert.False(t, exists(p.Record))
}
