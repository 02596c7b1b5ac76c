package credential

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Revocations is the revocation list loaded from a file, with the node
// credential epochs of the EpochsFile beside it; safe for concurrent
// use. The files are re-read only when the size or modification time of
// either changes.
type Revocations struct {
	path   string
	epochs string // EpochsFile beside path

	mu      sync.RWMutex
	entries map[string]struct{} // guarded by mu
	nodes   map[string]uint64   // guarded by mu; epoch per node, absent: 0
	files   [2]fileStamp        // guarded by mu; of path and epochs, as last loaded
}

// fileStamp is what Load compares to tell a file changed.
type fileStamp struct {
	exists  bool
	modTime time.Time
	size    int64
}

func stampOf(info fs.FileInfo) fileStamp {
	if info == nil {
		return fileStamp{}
	}
	return fileStamp{exists: true, modTime: info.ModTime(), size: info.Size()}
}

// NewRevocations returns an empty list read from path by Load.
func NewRevocations(path string) *Revocations {
	return &Revocations{path: path, epochs: filepath.Join(filepath.Dir(path), EpochsFile),
		entries: map[string]struct{}{}, nodes: map[string]uint64{}}
}

// Load re-reads the files if force is set or either changed since the
// last load, and reports whether it did. A missing file is an empty list.
// Malformed lines are skipped and returned in bad so the caller can log
// them.
func (r *Revocations) Load(force bool) (changed bool, bad []string, err error) {
	var stamps [2]fileStamp
	for i, p := range []string{r.path, r.epochs} {
		info, err := os.Stat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, nil, fmt.Errorf("stat %s: %w", p, err)
		}
		stamps[i] = stampOf(info)
	}
	if !force && !r.changed(stamps) {
		return false, nil, nil
	}
	entries, nodes := map[string]struct{}{}, map[string]uint64{}
	if stamps[0].exists {
		data, err := os.ReadFile(r.path)
		if err != nil {
			return false, nil, fmt.Errorf("read revocation list %s: %w", r.path, err)
		}
		entries, bad = parseRevocations(data)
	}
	if stamps[1].exists {
		data, err := os.ReadFile(r.epochs)
		if err != nil {
			return false, nil, fmt.Errorf("read node epochs %s: %w", r.epochs, err)
		}
		var badEpochs []string
		nodes, badEpochs = parseEpochs(data)
		bad = append(bad, badEpochs...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries, r.nodes, r.files = entries, nodes, stamps
	return true, bad, nil
}

// changed reports whether the files stamped differ from the ones last
// loaded.
func (r *Revocations) changed(stamps [2]fileStamp) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for i, s := range stamps {
		old := r.files[i]
		if s.exists != old.exists || s.exists && (!s.modTime.Equal(old.modTime) || s.size != old.size) {
			return true
		}
	}
	return false
}

// Revoked reports whether node, or the fingerprint of its current token,
// is listed.
func (r *Revocations) Revoked(secret []byte, node string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.entries) == 0 {
		return false
	}
	if _, ok := r.entries[node]; ok {
		return true
	}
	_, ok := r.entries[TokenFingerprint(NodeTokenAt(secret, node, r.nodes[node]))]
	return ok
}

// Epoch returns node's credential epoch (0 when not listed).
func (r *Revocations) Epoch(node string) uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.nodes[node]
}

// Epochs returns a copy of every node's epoch.
func (r *Revocations) Epochs() map[string]uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]uint64, len(r.nodes))
	for n, e := range r.nodes {
		out[n] = e
	}
	return out
}

// NodeToken returns node's token at its current epoch: the only one
// accepted.
func (r *Revocations) NodeToken(secret []byte, node string) string {
	return NodeTokenAt(secret, node, r.Epoch(node))
}

// Path is the file the list is read from.
func (r *Revocations) Path() string { return r.path }
