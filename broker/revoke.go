package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// revocations is the revocation list loaded from a file. The file is re-read
// only when its size or modification time changes.
type revocations struct {
	path string

	mu      sync.RWMutex
	entries map[string]struct{} // guarded by mu
	modTime time.Time           // guarded by mu; of the file last loaded
	size    int64               // guarded by mu; of the file last loaded
	exists  bool                // guarded by mu; whether the file existed
}

// newRevocations returns an empty list read from path by load.
func newRevocations(path string) *revocations {
	return &revocations{path: path, entries: map[string]struct{}{}}
}

// load re-reads the file if force is set or it changed since the last load,
// and reports whether it did. A missing file is an empty list. Malformed lines are
// skipped and returned in bad so the caller can log them.
func (r *revocations) load(force bool) (changed bool, bad []string, err error) {
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
func (r *revocations) changed(info fs.FileInfo, exists bool) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if exists != r.exists {
		return true
	}
	return exists && (!info.ModTime().Equal(r.modTime) || info.Size() != r.size)
}

// revoked reports whether node, or the fingerprint of its token, is listed.
func (r *revocations) revoked(secret []byte, node string) bool {
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
