package selfupdate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeset/edgeset/internal/atomicfile"
)

// RecordFormat is the format of the trial record. It is frozen: a binary
// a rollback returns to reads the record its successor wrote.
const RecordFormat = 1

// maxRecordBytes bounds the record read from disk.
const maxRecordBytes = 64 << 10

// State is where an upgrade stands.
type State string

// States of a trial record.
const (
	// StateTrial: the new binary is installed and must confirm.
	StateTrial State = "trial"
	// StateRollingBack: returning to the previous binary; the next start
	// finishes it.
	StateRollingBack State = "rollingBack"
	// StateRolledBack: returned; the record says why, and its To is not
	// tried again for its revision.
	StateRolledBack State = "rolledBack"
)

// Build identifies one agent binary.
type Build struct {
	Version string `json:"version"`
	// Digest is the sha256 of the binary ("sha256:<hex>").
	Digest string `json:"digest"`
}

// Record is the trial record, E.trial.
type Record struct {
	Format int   `json:"format"`
	State  State `json:"state"`
	// From is the binary replaced, To the one installed.
	From Build `json:"from"`
	To   Build `json:"to"`
	// Revision is the hash of the revision of the agent's daemonset that
	// asked for To.
	Revision string `json:"revision"`
	// Attempts counts the starts of To; MaxAttempts is how many it may
	// make without confirming.
	Attempts    int `json:"attempts"`
	MaxAttempts int `json:"maxAttempts"`
	// DeadlineSeconds is how long each start of To has to confirm.
	DeadlineSeconds int64 `json:"deadlineSeconds"`
	// Reason says why the rollback happened.
	Reason string `json:"reason,omitempty"`
}

// Deadline is DeadlineSeconds as a duration.
func (r Record) Deadline() time.Duration { return time.Duration(r.DeadlineSeconds) * time.Second }

// Paths are the files of the agent binary at Binary.
type Paths struct {
	Binary    string
	Previous  string
	Record    string
	Downloads string
}

// PathsOf returns the files of the binary at exe.
func PathsOf(exe string) Paths {
	dir, base := filepath.Split(exe)
	return Paths{Binary: exe, Previous: exe + ".previous", Record: exe + ".trial",
		Downloads: filepath.Join(dir, "."+base+".upgrade")}
}

// ReadRecord reads the trial record at path; nil when there is none.
func ReadRecord(path string) (*Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trial record: %w", err)
	}
	defer f.Close()
	var r Record
	dec := json.NewDecoder(&limited{f, maxRecordBytes})
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("trial record %s: %w", path, err)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("trial record %s: %w", path, err)
	}
	return &r, nil
}

// check validates a record read from disk.
func (r Record) check() error {
	switch {
	case r.Format != RecordFormat:
		return fmt.Errorf("format %d, this agent reads %d", r.Format, RecordFormat)
	case r.State != StateTrial && r.State != StateRollingBack && r.State != StateRolledBack:
		return fmt.Errorf("unknown state %q", r.State)
	case !strings.HasPrefix(r.From.Digest, "sha256:") || !strings.HasPrefix(r.To.Digest, "sha256:"):
		return errors.New("from.digest and to.digest must be sha256 digests")
	case r.Attempts < 0 || r.MaxAttempts < 1 || r.DeadlineSeconds < 1:
		return fmt.Errorf("attempts %d of %d, deadline %ds: out of range", r.Attempts, r.MaxAttempts, r.DeadlineSeconds)
	}
	return nil
}

// WriteRecord replaces the record at path atomically.
func WriteRecord(path string, r Record) error {
	r.Format = RecordFormat
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("trial record: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("trial record: %w", err)
	}
	return nil
}

// RemoveRecord removes the record at path, durably.
func RemoveRecord(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("trial record: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// limited fails a read past n bytes.
type limited struct {
	f *os.File
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxRecordBytes)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
