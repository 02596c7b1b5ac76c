package selfupdate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The steps of an install and of a rollback, in order. Each is one rename
// or one atomic write; a crash between two leaves a runnable binary at
// Paths.Binary and a record the next Start resolves (swap_test.go).
const (
	stepPrevious    = "previous kept"        // Previous holds the running binary
	stepRecord      = "trial record written" // the record says StateTrial
	stepSwap        = "binary swapped"       // Binary is the new binary
	stepRollingBack = "rollback recorded"    // the record says StateRollingBack
	stepRestore     = "previous restored"    // Binary is the previous binary again
	stepRolledBack  = "rollback finished"    // the record says StateRolledBack
)

// swapper moves the binaries of p. after, when set (tests), runs after
// each step; an error from it stops there, as a crash would.
type swapper struct {
	p     Paths
	after func(step string) error
}

func (s swapper) step(name string) error {
	if s.after == nil {
		return nil
	}
	return s.after(name)
}

// install makes candidate (a verified, checked binary on the same
// filesystem) the binary at p.Binary: the current one is kept as
// p.Previous, then rec (StateTrial) is written, then candidate is renamed
// over p.Binary.
func (s swapper) install(candidate string, rec Record) error {
	if err := keepPrevious(s.p); err != nil {
		return err
	}
	if err := s.step(stepPrevious); err != nil {
		return err
	}
	rec.State = StateTrial
	if err := WriteRecord(s.p.Record, rec); err != nil {
		return err
	}
	if err := s.step(stepRecord); err != nil {
		return err
	}
	if err := os.Chmod(candidate, 0o755); err != nil {
		return fmt.Errorf("install agent binary: %w", err)
	}
	if err := renameDurably(candidate, s.p.Binary); err != nil {
		return fmt.Errorf("install agent binary: %w", err)
	}
	return s.step(stepSwap)
}

// rollBack returns to p.Previous: the record says StateRollingBack (with
// the reason), p.Previous is renamed over p.Binary, and the record says
// StateRolledBack.
func (s swapper) rollBack(rec Record) error {
	if _, err := os.Stat(s.p.Previous); err != nil {
		return fmt.Errorf("roll back: no previous binary to return to: %w", err)
	}
	rec.State = StateRollingBack
	if err := WriteRecord(s.p.Record, rec); err != nil {
		return err
	}
	if err := s.step(stepRollingBack); err != nil {
		return err
	}
	return s.finishRollBack(rec)
}

// finishRollBack renames p.Previous over p.Binary and records
// StateRolledBack.
func (s swapper) finishRollBack(rec Record) error {
	if err := renameDurably(s.p.Previous, s.p.Binary); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	if err := s.step(stepRestore); err != nil {
		return err
	}
	rec.State = StateRolledBack
	if err := WriteRecord(s.p.Record, rec); err != nil {
		return err
	}
	return s.step(stepRolledBack)
}

// keepPrevious makes p.Previous a copy of p.Binary: a hard link when the
// filesystem has them, else a synced copy, put in place by a rename.
func keepPrevious(p Paths) error {
	tmp := p.Previous + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep the running binary: %w", err)
	}
	if err := os.Link(p.Binary, tmp); err != nil {
		if err := copyFile(p.Binary, tmp); err != nil {
			return fmt.Errorf("keep the running binary: %w", err)
		}
	}
	if err := renameDurably(tmp, p.Previous); err != nil {
		return fmt.Errorf("keep the running binary: %w", err)
	}
	return nil
}

// renameDurably renames from to to and syncs both directories.
func renameDurably(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return err
	}
	if filepath.Dir(from) != filepath.Dir(to) {
		return syncDir(filepath.Dir(from))
	}
	return nil
}

// copyFile copies from to a new file to (mode 0755), synced.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(to)
	}
	return err
}
