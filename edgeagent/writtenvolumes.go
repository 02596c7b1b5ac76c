package edgeagent

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// writtenVolumes remembers, per volume directory, the version writeAtomic
// last wrote or verified there and the digest of its payload, so that the
// agent's pass over an unchanged ConfigMap of 100,000 keys reads no file
// (comparing it costs seconds on a small device, on every pass). A
// directory whose ..data names another version (the agent restarted, the
// instance's files were removed and made again) is compared in full, as
// without it. The nil *writtenVolumes remembers nothing. Safe for
// concurrent use.
type writtenVolumes struct {
	mu    sync.Mutex
	byDir map[string]writtenVersion // guarded by mu
}

type writtenVersion struct{ ts, digest string }

func newWrittenVolumes() *writtenVolumes {
	return &writtenVolumes{byDir: map[string]writtenVersion{}}
}

// write is writeAtomic(dir, payload, fsGroup, now), skipped when dir
// holds the version w last saw with this payload.
func (w *writtenVolumes) write(dir string, payload map[string]fileProjection, fsGroup *int64, now time.Time) error {
	if w == nil {
		_, err := writeAtomic(dir, payload, fsGroup, now)
		return err
	}
	digest := payloadDigest(payload, fsGroup)
	ts, _ := os.Readlink(filepath.Join(dir, dataDirName))
	w.mu.Lock()
	last, ok := w.byDir[dir]
	w.mu.Unlock()
	if ok && ts != "" && last == (writtenVersion{ts, digest}) {
		return nil
	}
	if _, err := writeAtomic(dir, payload, fsGroup, now); err != nil {
		w.forget(dir)
		return err
	}
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		w.forget(dir)
		return nil
	}
	w.mu.Lock()
	w.byDir[dir] = writtenVersion{ts, digest}
	w.mu.Unlock()
	return nil
}

// retain forgets every directory not under one of the pod directories
// keep (podDir paths), so that removed instances leave nothing behind.
func (w *writtenVolumes) retain(keep map[string]bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for dir := range w.byDir {
		if !keep[podOfVolumeDir(dir)] {
			delete(w.byDir, dir)
		}
	}
}

func (w *writtenVolumes) forget(dir string) {
	w.mu.Lock()
	delete(w.byDir, dir)
	w.mu.Unlock()
}

// podOfVolumeDir is the podDir of a volumeDir: .../pods/{uid}.
func podOfVolumeDir(dir string) string {
	return filepath.Dir(filepath.Dir(filepath.Dir(dir)))
}

// payloadDigest hashes everything writeAtomic makes of payload: paths,
// modes, contents and the fsGroup.
func payloadDigest(payload map[string]fileProjection, fsGroup *int64) string {
	h := sha256.New()
	var n [8]byte
	num := func(v uint64) {
		binary.BigEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	if fsGroup != nil {
		num(1)
		num(uint64(*fsGroup))
	} else {
		num(0)
	}
	for _, p := range sortedKeys(payload) {
		f := payload[p]
		num(uint64(len(p)))
		h.Write([]byte(p))
		num(uint64(uint32(f.Mode)))
		num(uint64(len(f.Data)))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
