// Package imagefetch fetches container images from the controller's image
// store (edgesetctl image push) for a device that cannot reach a registry:
// the manifest, then the config and every layer blob, each resumed with an
// HTTP Range request from what is already on disk (so a dropped link, or
// an agent restart, continues where it stopped), each verified against
// its digest, then loads them into the engine as a docker-load archive.
//
// Blobs are kept under Options.Dir while they download
// (blobs/<hex>.partial) and once verified (blobs/<hex>) until the image
// is loaded; nothing unverified is ever loaded.
package imagefetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Errors of a fetch, wrapped with the image and blob.
var (
	// ErrDigest: a blob or manifest does not match its digest; the
	// download is discarded and nothing is loaded.
	ErrDigest = errors.New("digest mismatch")
	// ErrRefused: the controller refused the request (not in its store,
	// not referenced by this node's desired state, wrong credential).
	ErrRefused = errors.New("refused by the controller")
)

// Limits of what the controller may send.
const (
	maxManifestBytes = 4 << 20
	maxLayers        = 256
)

// Loader loads a docker-load archive (docker save's layout) into the
// container engine. The Docker runtime implements it.
type Loader interface {
	LoadImage(ctx context.Context, archive io.Reader) error
}

// Options configure a Fetcher; zero fields take the defaults documented.
type Options struct {
	// URL is the controller's API, such as https://controller:8080.
	URL string
	// Node and Token are the node's name and MQTT token, sent as HTTP
	// basic auth.
	Node, Token string
	// Dir holds the blobs being downloaded; required.
	Dir string
	// Loader loads a fetched image; required by FetchImage (FetchLayer
	// needs none).
	Loader Loader
	// Client defaults to an http.Client without timeout (the context
	// bounds a fetch).
	Client *http.Client
	// Attempts bounds the requests per blob within one fetch when the
	// link drops mid-blob (each resumes); default 5. A fetch that still
	// fails leaves the partial blob for the next fetch to resume.
	Attempts int
	// RetryDelay is the pause between attempts; default 500 ms.
	RetryDelay time.Duration
	// IdleTimeout abandons a request that receives nothing this long (a
	// link that died without a reset), to be resumed by the next attempt;
	// default 60 s.
	IdleTimeout time.Duration
	// Log defaults to slog.Default().
	Log *slog.Logger
}

// Fetcher fetches images from the controller. Its FetchImage calls are
// serialised: one image downloads at a time.
type Fetcher struct {
	opts Options
	mu   sync.Mutex // serialises fetches (they share Dir)
}

// New returns a Fetcher for opts.
func New(opts Options) (*Fetcher, error) {
	switch {
	case opts.URL == "":
		return nil, errors.New("image fetch: no controller URL")
	case opts.Dir == "":
		return nil, errors.New("image fetch: no directory")
	}
	if _, err := url.Parse(opts.URL); err != nil {
		return nil, fmt.Errorf("image fetch: controller URL %q: %w", opts.URL, err)
	}
	opts.URL = strings.TrimRight(opts.URL, "/")
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 500 * time.Millisecond
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = time.Minute
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "blobs"), 0o700); err != nil {
		return nil, fmt.Errorf("image fetch: %w", err)
	}
	return &Fetcher{opts: opts}, nil
}

// FetchImage downloads image from the controller, verifies every blob and
// loads it into the engine under the name image.
func (f *Fetcher) FetchImage(ctx context.Context, image string) error {
	return f.FetchImageProgress(ctx, image, nil)
}

// FetchImageProgress is FetchImage reporting, when progress is not nil,
// the bytes of the image's blobs present (a resumed blob's earlier part
// included) of their total size, as they arrive (progress.go). A digest
// reference ("app@sha256:...") is fetched by that digest.
func (f *Fetcher) FetchImageProgress(ctx context.Context, image string, progress func(done, total int64)) error {
	_, digest, _ := strings.Cut(image, "@")
	return f.fetch(ctx, image, digest, progress)
}

// FetchImageDigest implements edgeagent.DigestFetcher: it fetches the
// image whose manifest has digest (an image a revision pins), checks the
// manifest against that digest, and loads it tagged as image (untagged,
// known by its ID, when image is a reference by digest alone).
func (f *Fetcher) FetchImageDigest(ctx context.Context, image, digest string, progress func(done, total int64)) error {
	if err := validDigest(digest); err != nil {
		return fmt.Errorf("fetch image %s from the controller: %w", image, err)
	}
	return f.fetch(ctx, image, digest, progress)
}

// fetch fetches image, by manifest digest when digest is set.
func (f *Fetcher) fetch(ctx context.Context, image, digest string, progress func(done, total int64)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.opts.Loader == nil {
		return fmt.Errorf("fetch image %s from the controller: this fetcher loads no images (no loader)", image)
	}
	m, err := f.manifest(ctx, image, digest)
	if err != nil {
		return fmt.Errorf("fetch image %s from the controller: %w", image, err)
	}
	blobs := append([]ocispec.Descriptor{m.Config}, m.Layers...)
	meter := newMeter(progress, blobs)
	for _, d := range blobs {
		if err := f.blob(ctx, d, meter); err != nil {
			return fmt.Errorf("fetch image %s from the controller: %w", image, err)
		}
	}
	if err := f.load(ctx, loadTag(image), m); err != nil {
		return fmt.Errorf("load image %s fetched from the controller: %w", image, err)
	}
	for _, d := range blobs {
		_ = os.Remove(f.blobPath(d.Digest.String()))
	}
	return nil
}

// get sends an authenticated GET for path under /api/v1/node/.
func (f *Fetcher) get(ctx context.Context, path string, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.opts.URL+"/api/v1/node/"+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.SetBasicAuth(f.opts.Node, f.opts.Token)
	return f.opts.Client.Do(req)
}

// refused turns a non-success answer into an error carrying the
// controller's message.
func refused(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	return fmt.Errorf("%w: HTTP %d: %s", ErrRefused, resp.StatusCode, msg)
}

// loadTag is the tag an image fetched for reference image is loaded
// under: the reference without its digest, if it has a tag; none for a
// reference by digest alone (the engine then knows the image by its ID).
func loadTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	if !hasDigest {
		return image
	}
	if last := name[strings.LastIndex(name, "/")+1:]; strings.Contains(last, ":") {
		return name
	}
	return ""
}

// manifest fetches and checks the image's manifest: the one of digest
// when set, which the content must hash to whatever the controller says.
func (f *Fetcher) manifest(ctx context.Context, image, digest string) (ocispec.Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.IdleTimeout) // a few KiB at most
	defer cancel()
	path := "manifests?image=" + url.QueryEscape(image)
	if digest != "" {
		path += "&digest=" + url.QueryEscape(digest)
	}
	resp, err := f.get(ctx, path, nil)
	if err != nil {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %w", refused(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestBytes+1))
	if err != nil {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	if len(body) > maxManifestBytes {
		return ocispec.Manifest{}, fmt.Errorf("manifest: larger than %d bytes", maxManifestBytes)
	}
	if want := resp.Header.Get("Docker-Content-Digest"); want != digestOf(body) {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %w: content is %s, the controller says %s", ErrDigest, digestOf(body), want)
	}
	if digest != "" && digest != digestOf(body) {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %w: content is %s, the pinned digest %s", ErrDigest, digestOf(body), digest)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	if len(m.Layers) > maxLayers {
		return ocispec.Manifest{}, fmt.Errorf("manifest: %d layers, more than %d", len(m.Layers), maxLayers)
	}
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if err := validDigest(d.Digest.String()); err != nil || d.Size < 0 {
			return ocispec.Manifest{}, fmt.Errorf("manifest: blob %q (%d bytes): not a sha256 digest and size", d.Digest, d.Size)
		}
	}
	return m, nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// validDigest checks "sha256:" and 64 lowercase hex digits, so that a
// digest is safe as a file name.
func validDigest(d string) error {
	h, ok := strings.CutPrefix(d, "sha256:")
	if _, err := hex.DecodeString(h); !ok || len(h) != 64 || strings.ToLower(h) != h || err != nil {
		return fmt.Errorf("digest %q: want sha256: and 64 lowercase hex digits", d)
	}
	return nil
}

func (f *Fetcher) blobPath(digest string) string {
	return filepath.Join(f.opts.Dir, "blobs", strings.TrimPrefix(digest, "sha256:"))
}

// blob makes the verified blob of d present under Dir, resuming a partial
// download, retrying a dropped link up to Options.Attempts times.
func (f *Fetcher) blob(ctx context.Context, d ocispec.Descriptor, m *meter) error {
	final := f.blobPath(d.Digest.String())
	if info, err := os.Stat(final); err == nil && info.Size() == d.Size {
		m.blobDone(d.Size)
		return nil // verified by an earlier fetch whose load failed
	}
	partial := final + ".partial"
	var err error
	for attempt := 1; attempt <= f.opts.Attempts; attempt++ {
		var retry bool
		retry, err = f.download(ctx, d, partial, m)
		if err == nil || !retry || ctx.Err() != nil {
			break
		}
		f.opts.Log.Info("image blob download interrupted; resuming", "blob", d.Digest, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(f.opts.RetryDelay):
		}
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if err := verify(partial, d); err != nil {
		_ = os.Remove(partial)
		return fmt.Errorf("blob %s: %w (the download is discarded)", d.Digest, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	m.blobDone(d.Size)
	return nil
}

// download appends to partial what the controller has past its end. It
// reports whether a failure is worth retrying (a dropped link, a busy or
// failing controller).
func (f *Fetcher) download(ctx context.Context, d ocispec.Descriptor, partial string, m *meter) (retry bool, err error) {
	file, err := os.OpenFile(partial, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return false, err
	}
	defer file.Close()
	off, err := file.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	if off > d.Size {
		if err := file.Truncate(0); err != nil {
			return false, err
		}
		off = 0
	}
	if off == d.Size {
		return false, nil
	}
	hdr := http.Header{}
	if off > 0 {
		hdr.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		hdr.Set("If-Range", `"`+d.Digest.String()+`"`)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(f.opts.IdleTimeout, cancel)
	defer idle.Stop()
	resp, err := f.get(ctx, "blobs/"+d.Digest.String(), hdr)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && off > 0:
		if start := contentRangeStart(resp.Header.Get("Content-Range")); start != off {
			return false, fmt.Errorf("controller answered range %q for bytes=%d-", resp.Header.Get("Content-Range"), off)
		}
	case resp.StatusCode == http.StatusOK:
		if err := file.Truncate(0); err != nil {
			return false, err
		}
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
		off = 0
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, refused(resp)
	default:
		return false, refused(resp)
	}
	body := &idleReader{r: resp.Body, timer: idle, idle: f.opts.IdleTimeout}
	m.partial(off)
	_, err = io.Copy(m.writer(file, off), io.LimitReader(body, d.Size-off))
	if serr := file.Sync(); err == nil {
		err = serr // what arrived survives a restart of the agent
	}
	if err != nil {
		return true, err
	}
	return false, nil
}

// idleReader restarts timer, which abandons the request, on every read
// that brings bytes.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.timer.Reset(i.idle)
	}
	return n, err
}

// contentRangeStart returns the first byte of "bytes FIRST-LAST/SIZE",
// or -1.
func contentRangeStart(v string) int64 {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return -1
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// verify checks a downloaded file against its descriptor.
func verify(path string, d ocispec.Descriptor) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return err
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if n != d.Size || got != d.Digest.String() {
		return fmt.Errorf("%w: received %d bytes with digest %s, want %d bytes with %s", ErrDigest, n, got, d.Size, d.Digest)
	}
	return nil
}
