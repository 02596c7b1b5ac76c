package selfupdate

import "fmt"

// Action is what a start of the agent does about the trial record.
type Action int

// Actions of Decide.
const (
	// Run: no record; an ordinary start.
	Run Action = iota
	// Discard: the record does not concern this binary (a swap that never
	// happened, a binary installed by hand): remove it, then run.
	Discard
	// Trial: this is a start of the binary on trial: write the record
	// (the start counted), run, and confirm by the deadline.
	Trial
	// RollBack: the binary on trial has used its starts: return to the
	// previous binary, then restart.
	RollBack
	// FinishRollBack: a rollback was interrupted before the previous
	// binary was back: finish it, then restart.
	FinishRollBack
	// Rejected: this binary is what a rollback returned to: write the
	// record if it changed, run, and report the rejected version.
	Rejected
)

func (a Action) String() string {
	return [...]string{"run", "discard", "trial", "roll back", "finish rollback", "rejected"}[a]
}

// Decision is Decide's answer: the action and, for Trial, RollBack and
// Rejected, the record as it must be written.
type Decision struct {
	Action Action
	Record Record
}

// Decide says what a start of the binary self does about the trial record
// rec (nil: none). It is pure: Start acts on it.
func Decide(rec *Record, self Build) Decision {
	if rec == nil {
		return Decision{Action: Run}
	}
	r := *rec
	switch {
	case self.Digest == r.To.Digest && r.State == StateTrial:
		r.Attempts++
		if r.Attempts > r.MaxAttempts {
			r.Reason = fmt.Sprintf("agent %s started %d times without connecting and receiving its desired state (it crashed or was stopped each time)",
				r.To.Version, r.MaxAttempts)
			return Decision{Action: RollBack, Record: r}
		}
		return Decision{Action: Trial, Record: r}
	case self.Digest == r.To.Digest && r.State == StateRollingBack:
		return Decision{Action: FinishRollBack, Record: r}
	case self.Digest == r.From.Digest && r.State == StateRollingBack:
		r.State = StateRolledBack // the previous binary is back: only the record was not written
		return Decision{Action: Rejected, Record: r}
	case self.Digest == r.From.Digest && r.State == StateRolledBack:
		return Decision{Action: Rejected, Record: r}
	}
	// StateTrial as From: the new binary was never renamed into place;
	// StateRolledBack as To, or neither build: installed by hand.
	return Decision{Action: Discard, Record: r}
}
