package selfupdate

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// ErrRestart: the agent installed another binary, or returned to the
// previous one, and must exit with ExitRestart for the service manager to
// start the binary now at its path.
var ErrRestart = errors.New("the agent restarts into another binary")

// ExitRestart is the exit code after ErrRestart (EX_TEMPFAIL). The
// systemd unit restarts on it (RestartForceExitStatus), whatever its
// Restart= setting.
const ExitRestart = 75

// Boot is what Start found beside the binary: the state an Upgrader
// continues from.
type Boot struct {
	Paths Paths
	// Self is the running binary; its Digest is known only when Start
	// read a record (the Upgrader computes it when it needs it).
	Self Build
	// Started is when Start ran: a trial's deadline counts from it.
	Started time.Time
	// Trial is this binary's trial, nil unless it is on trial.
	Trial *Record
	// Rejected is the rollback that returned to this binary, nil if none.
	Rejected *Record
}

// Start is the first thing the agent does, before it reads its
// configuration (which a new version may read differently): it reads the
// trial record beside exe and acts on Decide's answer. It returns
// ErrRestart when it rolled back (or finished a rollback): the caller
// exits with ExitRestart. A record it cannot read is removed, logged, and
// the agent runs.
func Start(exe string, log *slog.Logger) (Boot, error) {
	return start(swapper{p: PathsOf(exe)}, func() (string, error) { return fileDigest(runningBinary(exe)) }, log)
}

// start is Start with the digest of the running binary from selfDigest.
func start(s swapper, selfDigest func() (string, error), log *slog.Logger) (Boot, error) {
	b := Boot{Paths: s.p, Self: Build{Version: schema.Version}, Started: time.Now()}
	rec, err := ReadRecord(s.p.Record)
	if err != nil {
		log.Error("the agent's trial record cannot be read; removing it", "err", err)
		return b, RemoveRecord(s.p.Record)
	}
	if rec == nil {
		return b, nil
	}
	if b.Self.Digest, err = selfDigest(); err != nil {
		return b, fmt.Errorf("agent binary: %w", err)
	}
	d := Decide(rec, b.Self)
	switch d.Action {
	case Discard:
		log.Warn("the agent's trial record does not concern this binary; removing it", "record", rec.To.Version, "state", rec.State, "digest", b.Self.Digest)
		return b, RemoveRecord(s.p.Record)
	case Trial:
		log.Info("agent on trial: it must connect and receive its desired state", "version", rec.To.Version,
			"start", d.Record.Attempts, "of", d.Record.MaxAttempts, "deadline", d.Record.Deadline())
		if err := WriteRecord(s.p.Record, d.Record); err != nil {
			log.Error("cannot count this start of the agent on trial", "err", err)
		}
		b.Trial = &d.Record
	case RollBack:
		return b, s.rollBackOrRun(d.Record, log)
	case FinishRollBack:
		log.Warn("finishing an interrupted rollback", "from", rec.To.Version, "to", rec.From.Version)
		if err := s.finishRollBack(d.Record); err != nil {
			log.Error("cannot finish the rollback; running this binary", "err", err)
			return b, RemoveRecord(s.p.Record)
		}
		return b, ErrRestart
	case Rejected:
		if d.Record != *rec {
			if err := WriteRecord(s.p.Record, d.Record); err != nil {
				log.Error("cannot record the finished rollback", "err", err)
			}
		}
		b.Rejected = &d.Record
	}
	return b, nil
}

// rollBackOrRun rolls back to the previous binary and returns ErrRestart,
// or, when there is none to return to, removes the record and returns nil
// (the binary runs: nothing else could).
func (s swapper) rollBackOrRun(rec Record, log *slog.Logger) error {
	log.Error("rolling the agent back", "from", rec.To.Version, "to", rec.From.Version, "reason", rec.Reason)
	if err := s.rollBack(rec); err != nil {
		log.Error("cannot roll the agent back; it keeps running", "err", err)
		return RemoveRecord(s.p.Record)
	}
	return ErrRestart
}

// Executable returns the path of the running binary with symbolic links
// resolved: the file an upgrade replaces.
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	return exe, nil
}
