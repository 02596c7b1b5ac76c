package selfupdate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDecide(t *testing.T) {
	v1 := Build{Version: "v1", Digest: "sha256:" + hex64('1')}
	v2 := Build{Version: "v2", Digest: "sha256:" + hex64('2')}
	other := Build{Version: "v9", Digest: "sha256:" + hex64('9')}
	rec := func(state State, attempts int) *Record {
		return &Record{Format: RecordFormat, State: state, From: v1, To: v2, Revision: "r2", Attempts: attempts, MaxAttempts: 3, DeadlineSeconds: 60}
	}
	cases := []struct {
		name         string
		rec          *Record
		self         Build
		want         Action
		wantAttempts int
		wantState    State
		wantReason   bool
	}{
		{name: "no record", rec: nil, self: v1, want: Run},
		{name: "first start on trial", rec: rec(StateTrial, 0), self: v2, want: Trial, wantAttempts: 1, wantState: StateTrial},
		{name: "last start allowed", rec: rec(StateTrial, 2), self: v2, want: Trial, wantAttempts: 3, wantState: StateTrial},
		{name: "starts used up: crash loop", rec: rec(StateTrial, 3), self: v2, want: RollBack, wantAttempts: 4, wantState: StateTrial, wantReason: true},
		{name: "swap never happened", rec: rec(StateTrial, 0), self: v1, want: Discard, wantState: StateTrial},
		{name: "rollback interrupted before the rename", rec: rec(StateRollingBack, 1), self: v2, want: FinishRollBack, wantAttempts: 1, wantState: StateRollingBack},
		{name: "rollback interrupted after the rename", rec: rec(StateRollingBack, 1), self: v1, want: Rejected, wantAttempts: 1, wantState: StateRolledBack},
		{name: "rolled back", rec: rec(StateRolledBack, 4), self: v1, want: Rejected, wantAttempts: 4, wantState: StateRolledBack},
		{name: "rolled-back binary installed by hand", rec: rec(StateRolledBack, 4), self: v2, want: Discard, wantAttempts: 4, wantState: StateRolledBack},
		{name: "another binary installed by hand during a trial", rec: rec(StateTrial, 1), self: other, want: Discard, wantAttempts: 1, wantState: StateTrial},
		{name: "another binary installed by hand after a rollback", rec: rec(StateRolledBack, 1), self: other, want: Discard, wantAttempts: 1, wantState: StateRolledBack},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before Record
			if tc.rec != nil {
				before = *tc.rec
			}
			d := Decide(tc.rec, tc.self)
			if tc.rec != nil {
				assert.Equal(t, before, *tc.rec, "Decide leaves its input alone")
			}
			assert.Equal(t, tc.want.String(), d.Action.String())
			if tc.rec == nil {
				return
			}
			assert.Equal(t, tc.wantAttempts, d.Record.Attempts)
			assert.Equal(t, tc.wantState, d.Record.State)
			assert.Equal(t, tc.wantReason, d.Record.Reason != "", "reason %q", d.Record.Reason)
		})
	}
}

// TestDecideAttemptsProperty: over every record state, attempt count and
// build, Decide never lets a binary on trial start more than MaxAttempts
// times, and only ever rolls back the binary on trial.
func TestDecideAttemptsProperty(t *testing.T) {
	v1 := Build{Version: "v1", Digest: "sha256:" + hex64('1')}
	v2 := Build{Version: "v2", Digest: "sha256:" + hex64('2')}
	for _, state := range []State{StateTrial, StateRollingBack, StateRolledBack} {
		for maxAttempts := 1; maxAttempts <= 4; maxAttempts++ {
			for attempts := 0; attempts <= maxAttempts+1; attempts++ {
				for _, self := range []Build{v1, v2} {
					r := &Record{Format: RecordFormat, State: state, From: v1, To: v2, Attempts: attempts, MaxAttempts: maxAttempts, DeadlineSeconds: 1}
					d := Decide(r, self)
					if d.Action == Trial && d.Record.Attempts > maxAttempts {
						t.Errorf("%+v as %s: trial start %d of %d", r, self.Version, d.Record.Attempts, maxAttempts)
					}
					if (d.Action == RollBack || d.Action == FinishRollBack) && self != v2 {
						t.Errorf("%+v as %s: %s of a binary not on trial", r, self.Version, d.Action)
					}
				}
			}
		}
	}
}

// hex64 is 64 copies of c, a digest's hex part.
func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
