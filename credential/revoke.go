package credential

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// Revocations is the revocation list loaded from a file; safe for
// concurrent use. The file is re-read
// only when its size or modification time changes.
type Revocations struct {
	path string

	mu      sync.RWMutex
	entries map[string]struct{} // guarded by mu
	modTime time.Time           // guarded by mu; of the file last loaded
	size    int64               // guarded by mu; of the file last loaded
	exists  bool                // guarded by mu; whether the file existed
}

// NewRevocations returns an empty list read from path by Load.
func NewRevocations(path string) *Revocations {
	return &Revocations{path: path, entries: map[string]struct{}{}}
}

// Load re-reads the file if force is set or it changed since the last load,
// and reports whether it did. A missing file is an empty list. Malformed lines are
// skipped and returned in bad so the caller can log them.
func (r *Revocations) Load(force bool) (changed bool, bad []string, err error) {
	info, err := os.Stat(r.path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, nil, fmt.Errorf("stat revocation list %s: %w", r.path, err)
	}
	if !force && !r.changed(info, exists) {
		return false, nil, nil
	}
	entries := map[string]struct{}{}
	if exists {
		data, err := os.ReadFile(r.path)
		if err != nil {
			return false, nil, fmt.Errorf("read revocation list %s: %w", r.path, err)
		}
		entries, bad = parseRevocations(data)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries, r.exists = entries, exists
	if exists {
		r.modTime, r.size = info.ModTime(), info.Size()
	}
	return true, bad, nil
}

// changed reports whether the file described by info differs from the one
// last loaded.
func (r *Revocations) changed(info fs.FileInfo, exists bool) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if exists != r.exists {
		return true
	}
	return exists && (!info.ModTime().Equal(r.modTime) || info.Size() != r.size)
}

// Revoked reports whether node, or the fingerprint of its token, is listed.
func (r *Revocations) Revoked(secret []byte, node string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.entries) == 0 {
		return false
	}
	if _, ok := r.entries[node]; ok {
		return true
	}
	_, ok := r.entries[TokenFingerprint(NodeToken(secret, node))]
	return ok
}

// Path is the file the list is read from.
func (r *Revocations) Path() string { return r.path }
