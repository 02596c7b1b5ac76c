// Package selfupdate lets the agent replace its own binary: the instance
// of the reserved daemonset schema.AgentDaemonSet on a node is the agent
// itself (docs/rollouts.md, "Upgrading the agent").
//
// Files, beside the running binary E (its directory must be writable by
// the agent):
//
//	E                   the binary the service manager starts
//	E.previous          the binary E replaced: what a rollback returns to
//	E.trial             the trial record (JSON, replaced atomically)
//	.NAME.upgrade/      downloads, resumed across drops and restarts
//
// An upgrade (Upgrader) downloads the binary of the node's platform from
// the controller's image store, verifies it against the digest the
// revision pins (the fleet's keys sign the revision when signing is on),
// runs `NEW version --json` expecting the revision's version and this
// platform, and installs it (Install): E hard-linked (or copied) to
// E.previous, the trial record written, the new binary renamed over E.
// The agent then exits with ExitRestart and the service manager starts
// E again: the new binary.
//
// Before it reads its configuration the agent calls Start, which reads
// the trial record and decides (Decide, a pure function) what this start
// is: an ordinary one, a trial start (counted; past the record's attempts
// the binary rolls back), the end of an interrupted rollback, or the
// binary a rollback returned to, which then reports the rejected version
// as Failed and does not try it again. A binary on trial that connects to
// the broker and receives its desired state within the deadline confirms
// (the record is removed); otherwise it rolls back: E.previous renamed
// over E, the record kept as rolledBack with the reason, ExitRestart.
//
// Every step is a rename or an atomic file write, ordered so that a crash
// between any two leaves a runnable binary at E and a record that the
// next Start resolves (swap_test.go crashes after each step).
//
// What a binary cannot catch about itself: a new binary that never
// reaches Start (a binary that is not an edgeset agent, one that hangs
// before main) is neither counted nor rolled back. The check before the
// swap runs the candidate in the same environment, which turns away a
// wrong architecture, a corrupt file and a non-agent; the record's format
// (version 1) is frozen so that every later agent can read it.
package selfupdate
