package imagestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// commit makes the blobs of images visible, then their image files, under
// the quota: if the new blobs do not fit, unreferenced images (other than
// those pushed) are collected first, and the push is refused with ErrQuota
// if that is not enough.
func (s *Store) commit(images []parsed) ([]Image, error) {
	inUse := s.opts.InUse()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.makeRoomLocked(images, inUse); err != nil {
		return nil, err
	}
	for _, p := range images {
		for _, st := range append([]staged{p.manifest, p.config}, p.layers...) {
			if err := s.putBlobLocked(st); err != nil {
				return nil, fmt.Errorf("push image %s: %w", p.name, err)
			}
		}
	}
	if err := syncDir(s.blobDir()); err != nil {
		return nil, err
	}
	now := s.opts.Clock().UTC()
	out := make([]Image, 0, len(images))
	for _, p := range images {
		if err := s.keepPinnedLocked(p.name, p.manifest.digest, inUse); err != nil {
			return nil, err
		}
		im, err := s.putImageLocked(p, now)
		if err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	// A replaced name may leave blobs of its old manifest unreferenced.
	return out, s.sweepLocked()
}

// makeRoomLocked checks the quota for the blobs of images the store does
// not hold yet, collecting unreferenced images if they do not fit.
func (s *Store) makeRoomLocked(images []parsed, inUse map[string]bool) error {
	need := s.newBytesLocked(images)
	if s.used+need <= s.opts.Quota {
		return nil
	}
	keep := map[string]bool{}
	for _, p := range images {
		keep[p.name] = true
	}
	if _, _, err := s.collectLocked(inUse, keep); err != nil {
		return err
	}
	if need = s.newBytesLocked(images); s.used+need <= s.opts.Quota {
		return nil
	}
	return fmt.Errorf("push image %s: %w: it needs %d new bytes, %d of %d are used by images in use or pushed within %s",
		names(images), ErrQuota, need, s.used, s.opts.Quota, s.opts.GCGrace)
}

// newBytesLocked is the size of the distinct blobs of images not stored.
func (s *Store) newBytesLocked(images []parsed) int64 {
	seen := map[string]bool{}
	var n int64
	for _, p := range images {
		for _, st := range append([]staged{p.manifest, p.config}, p.layers...) {
			if _, ok := s.blobs[st.digest]; ok || seen[st.digest] {
				continue
			}
			seen[st.digest] = true
			n += st.size
		}
	}
	return n
}

func names(images []parsed) string {
	out := make([]string, len(images))
	for i, p := range images {
		out[i] = p.name
	}
	return strings.Join(out, ", ")
}

// putBlobLocked fsyncs a staged file and renames it into blobs/, unless
// the store has that blob already.
func (s *Store) putBlobLocked(st staged) error {
	if _, ok := s.blobs[st.digest]; ok {
		return nil
	}
	f, err := os.OpenFile(st.file, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the same file staged for two images: already moved
	}
	if err != nil {
		return fmt.Errorf("store blob %s: %w", st.digest, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store blob %s: %w", st.digest, err)
	}
	if err := os.Rename(st.file, s.blobPath(st.digest)); err != nil {
		return fmt.Errorf("store blob %s: %w", st.digest, err)
	}
	s.blobs[st.digest] = st.size
	s.used += st.size
	return nil
}

// putImageLocked writes the image file of p, replacing any of that name.
func (s *Store) putImageLocked(p parsed, now time.Time) (Image, error) {
	return s.writeImageLocked(p.name, p.manifest.digest, now)
}

// writeImageLocked writes the image file naming manifest digest name,
// replacing any of that name; the manifest and its blobs are stored.
func (s *Store) writeImageLocked(name, digest string, pushed time.Time) (Image, error) {
	raw, err := json.Marshal(imageFile{Name: name, Manifest: digest, Pushed: pushed})
	if err != nil {
		return Image{}, fmt.Errorf("push image %s: %w", name, err)
	}
	body, err := os.ReadFile(s.blobPath(digest))
	if err != nil {
		return Image{}, fmt.Errorf("push image %s: %w", name, err)
	}
	im, err := imageOf(name, digest, body, pushed)
	if err != nil {
		return Image{}, err
	}
	if err := writeFileAtomic(s.imagePath(name), raw); err != nil {
		return Image{}, fmt.Errorf("push image %s: %w", name, err)
	}
	s.images[name] = im
	return im, nil
}

// keepPinnedLocked keeps the image name holds when a push replaces it
// with a manifest other than digest while a revision pins the old one
// (inUse holds its DigestName): the old image stays under its digest
// name, so nodes still fetch what the revision pins (and a rollback finds
// it) until no revision pins it and garbage collection takes it.
func (s *Store) keepPinnedLocked(name, digest string, inUse map[string]bool) error {
	old, ok := s.images[name]
	if !ok || old.Digest == digest {
		return nil
	}
	pinned, err := DigestName(name, old.Digest)
	if _, kept := s.images[pinned]; err != nil || !inUse[pinned] || kept {
		return nil // not pinned (a name that does not parse never is), or kept already
	}
	_, err = s.writeImageLocked(pinned, old.Digest, old.Pushed)
	return err
}
