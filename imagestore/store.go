package imagestore

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Errors of the store; each is wrapped with the image or blob it concerns.
var (
	// ErrNotFound: no image of that name, or no blob of that digest.
	ErrNotFound = errors.New("not in the image store")
	// ErrInvalid: an upload is not a docker save or OCI image-layout
	// archive, or a name or digest is malformed.
	ErrInvalid = errors.New("invalid image")
	// ErrDigest: content does not match the digest that names it.
	ErrDigest = errors.New("digest mismatch")
	// ErrTooLarge: an upload is larger than Options.MaxUpload.
	ErrTooLarge = errors.New("upload too large")
	// ErrQuota: storing an upload would exceed Options.Quota, even after
	// collecting every unreferenced image.
	ErrQuota = errors.New("image store quota exceeded")
	// ErrInUse: a revision references the image (Remove without force).
	ErrInUse = errors.New("image in use")
)

// Defaults of Options.
const (
	DefaultQuota     = 10 << 30
	DefaultMaxUpload = 4 << 30
	DefaultGCGrace   = time.Hour
)

// Options configure a Store; zero fields take the defaults above.
type Options struct {
	// Dir is the store's directory; required.
	Dir string
	// Quota bounds the bytes of all blobs.
	Quota int64
	// MaxUpload bounds one upload (the archive as sent).
	MaxUpload int64
	// GCGrace spares an unreferenced image this long after its push, so
	// an operator can push and then apply.
	GCGrace time.Duration
	// InUse returns the normalized names of the images some revision
	// references; garbage collection never removes those. Nil: none.
	InUse func() map[string]bool
	// Clock defaults to time.Now.
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Quota <= 0 {
		o.Quota = DefaultQuota
	}
	if o.MaxUpload <= 0 {
		o.MaxUpload = DefaultMaxUpload
	}
	if o.GCGrace <= 0 {
		o.GCGrace = DefaultGCGrace
	}
	if o.InUse == nil {
		o.InUse = func() map[string]bool { return nil }
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Descriptor names one blob.
type Descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// Image is one stored image: its name, the digest of its manifest, and
// the blobs the manifest references.
type Image struct {
	// Name is normalized (Normalize): docker.io/library/app:v1.
	Name string `json:"name"`
	// Digest is the manifest's: what a node fetches first.
	Digest string       `json:"digest"`
	Config Descriptor   `json:"config"`
	Layers []Descriptor `json:"layers"`
	// Size is the bytes of manifest, config and layers.
	Size   int64     `json:"size"`
	Pushed time.Time `json:"pushed"`
}

// Blobs returns the digests of the image's manifest, config and layers.
func (im Image) Blobs() []string {
	out := []string{im.Digest, im.Config.Digest}
	for _, l := range im.Layers {
		out = append(out, l.Digest)
	}
	return out
}

// imageFile is what images/<hex>.json holds.
type imageFile struct {
	Name     string    `json:"name"`
	Manifest string    `json:"manifest"`
	Pushed   time.Time `json:"pushed"`
}

// Store is a content-addressed image store on disk (see the package doc
// for its layout and invariants). Its methods are safe for concurrent use.
type Store struct {
	opts Options

	// mu guards images, blobs and used, and every rename into and removal
	// from blobs/ and images/. Uploads are received without it.
	mu     sync.Mutex
	images map[string]Image // by name
	blobs  map[string]int64 // size of each blob on disk, by digest
	used   int64            // sum of blobs
}

// Open opens (creating) the store in opts.Dir: it empties tmp/, loads
// the images, drops an image file whose blobs are missing, and removes
// blobs no image references (left by a crash between the two).
func Open(opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if opts.Dir == "" {
		return nil, errors.New("open image store: no directory")
	}
	s := &Store{opts: opts, images: map[string]Image{}, blobs: map[string]int64{}}
	for _, d := range []string{s.blobDir(), s.imageDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open image store: %w", err)
		}
	}
	if err := s.clearTmp(); err != nil {
		return nil, err
	}
	if err := s.loadBlobs(); err != nil {
		return nil, err
	}
	if err := s.loadImages(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sweepLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) blobDir() string  { return filepath.Join(s.opts.Dir, "blobs", "sha256") }
func (s *Store) imageDir() string { return filepath.Join(s.opts.Dir, "images") }
func (s *Store) tmpDir() string   { return filepath.Join(s.opts.Dir, "tmp") }

// blobPath is where the blob of a valid digest lives.
func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.blobDir(), strings.TrimPrefix(digest, "sha256:"))
}

// imagePath is the file of an image name.
func (s *Store) imagePath(name string) string {
	return filepath.Join(s.imageDir(), hexOf([]byte(name))+".json")
}

func (s *Store) clearTmp() error {
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return fmt.Errorf("open image store: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			return fmt.Errorf("open image store: clear unfinished upload: %w", err)
		}
	}
	return nil
}

func (s *Store) loadBlobs() error {
	entries, err := os.ReadDir(s.blobDir())
	if err != nil {
		return fmt.Errorf("open image store: %w", err)
	}
	for _, e := range entries {
		d := "sha256:" + e.Name()
		if ValidDigest(d) != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("open image store: %w", err)
		}
		s.blobs[d] = info.Size()
		s.used += info.Size()
	}
	return nil
}

func (s *Store) loadImages() error {
	entries, err := os.ReadDir(s.imageDir())
	if err != nil {
		return fmt.Errorf("open image store: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(s.imageDir(), e.Name())
		if !strings.HasSuffix(e.Name(), ".json") {
			_ = os.Remove(path) // a temporary file of an unfinished write
			continue
		}
		im, err := s.loadImage(path)
		if err != nil {
			// Not loadable: its blobs are gone or it was tampered with.
			// Drop it; the operator pushes the image again.
			if rmErr := os.Remove(path); rmErr != nil {
				return fmt.Errorf("open image store: drop %s (%v): %w", path, err, rmErr)
			}
			continue
		}
		s.images[im.Name] = im
	}
	return nil
}

func (s *Store) loadImage(path string) (Image, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Image{}, err
	}
	var f imageFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return Image{}, fmt.Errorf("%s: %w", path, err)
	}
	if ValidDigest(f.Manifest) != nil || s.imagePath(f.Name) != path {
		return Image{}, fmt.Errorf("%s: %w", path, ErrInvalid)
	}
	size, ok := s.blobs[f.Manifest]
	if !ok || size > maxMetadataBytes {
		return Image{}, fmt.Errorf("%s: manifest %s: %w", path, f.Manifest, ErrNotFound)
	}
	body, err := os.ReadFile(s.blobPath(f.Manifest))
	if err != nil {
		return Image{}, err
	}
	im, err := imageOf(f.Name, f.Manifest, body, f.Pushed)
	if err != nil {
		return Image{}, err
	}
	for _, d := range im.Blobs() {
		if _, ok := s.blobs[d]; !ok {
			return Image{}, fmt.Errorf("blob %s of image %s: %w", d, f.Name, ErrNotFound)
		}
	}
	return im, nil
}

// imageOf builds the Image of a stored manifest.
func imageOf(name, digest string, manifest []byte, pushed time.Time) (Image, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return Image{}, fmt.Errorf("manifest %s of image %s: %w", digest, name, err)
	}
	im := Image{Name: name, Digest: digest, Pushed: pushed, Size: int64(len(manifest)),
		Config: Descriptor{MediaType: m.Config.MediaType, Digest: m.Config.Digest.String(), Size: m.Config.Size}}
	im.Size += im.Config.Size
	for _, l := range m.Layers {
		im.Layers = append(im.Layers, Descriptor{MediaType: l.MediaType, Digest: l.Digest.String(), Size: l.Size})
		im.Size += l.Size
	}
	for _, d := range im.Blobs() {
		if err := ValidDigest(d); err != nil {
			return Image{}, fmt.Errorf("manifest %s of image %s: %w", digest, name, err)
		}
	}
	return im, nil
}

// Images returns every image, sorted by name.
func (s *Store) Images() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Image, 0, len(s.images))
	for _, im := range s.images {
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Image returns the image of a (normalized) name.
func (s *Store) Image(name string) (Image, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im, ok := s.images[name]
	return im, ok
}

// Usage returns the bytes the blobs take and the quota.
func (s *Store) Usage() (used, quota int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.opts.Quota
}

// Manifest returns the manifest of the image named name (normalized) and
// its digest.
func (s *Store) Manifest(name string) ([]byte, string, error) {
	im, ok := s.Image(name)
	if !ok {
		return nil, "", fmt.Errorf("image %s: %w", name, ErrNotFound)
	}
	body, err := os.ReadFile(s.blobPath(im.Digest))
	if err != nil {
		return nil, "", fmt.Errorf("manifest of image %s: %w", name, err)
	}
	return body, im.Digest, nil
}

// OpenBlob opens the blob of digest for reading. The file stays readable
// even if the blob is collected while it is open.
func (s *Store) OpenBlob(digest string) (*os.File, error) {
	if err := ValidDigest(digest); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blobs[digest]; !ok {
		return nil, fmt.Errorf("blob %s: %w", digest, ErrNotFound)
	}
	f, err := os.Open(s.blobPath(digest))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", digest, err)
	}
	return f, nil
}

// Remove removes the image of name (any form Normalize accepts) and the
// blobs no other image shares. An image a revision references is refused
// with ErrInUse unless force is set.
func (s *Store) Remove(name string, force bool) (Image, error) {
	n, err := Normalize(name)
	if err != nil {
		return Image{}, err
	}
	inUse := s.opts.InUse()
	s.mu.Lock()
	defer s.mu.Unlock()
	im, ok := s.images[n]
	if !ok {
		return Image{}, fmt.Errorf("image %s: %w", n, ErrNotFound)
	}
	if inUse[n] && !force {
		return Image{}, fmt.Errorf("image %s: %w: a daemonset revision references it (force to remove anyway)", n, ErrInUse)
	}
	if err := s.removeImageLocked(n); err != nil {
		return Image{}, err
	}
	return im, s.sweepLocked()
}

// removeImageLocked removes the file and entry of image name.
func (s *Store) removeImageLocked(name string) error {
	if err := os.Remove(s.imagePath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove image %s: %w", name, err)
	}
	delete(s.images, name)
	return syncDir(s.imageDir())
}

// sweepLocked removes the blobs no image references.
func (s *Store) sweepLocked() error {
	for _, d := range unreferencedBlobs(s.images, s.blobs) {
		if err := os.Remove(s.blobPath(d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove blob %s: %w", d, err)
		}
		s.used -= s.blobs[d]
		delete(s.blobs, d)
	}
	return nil
}

// GC removes the images no revision references (Options.InUse) pushed
// longer than Options.GCGrace ago, and their blobs. It returns the names
// removed and the bytes freed.
func (s *Store) GC() (removed []string, freed int64, err error) {
	inUse := s.opts.InUse()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collectLocked(inUse, nil)
}

// collectLocked is GC, sparing the names in keep as well.
func (s *Store) collectLocked(inUse, keep map[string]bool) ([]string, int64, error) {
	before := s.used
	names := collectable(s.images, inUse, keep, s.opts.Clock(), s.opts.GCGrace)
	for _, n := range names {
		if err := s.removeImageLocked(n); err != nil {
			return nil, 0, err
		}
	}
	err := s.sweepLocked()
	return names, before - s.used, err
}

// ValidDigest checks that d is "sha256:" and 64 lowercase hex digits, the
// only digests the store names blobs by.
func ValidDigest(d string) error {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 || strings.ToLower(h) != h {
		return fmt.Errorf("digest %q: %w: want sha256: and 64 lowercase hex digits", d, ErrInvalid)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return fmt.Errorf("digest %q: %w: want sha256: and 64 lowercase hex digits", d, ErrInvalid)
	}
	return nil
}
