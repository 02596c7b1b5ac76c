package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/imagestore"
	"github.com/edgeset/edgeset/schema"
)

// imageGCInterval is how often the image store collects the images no
// revision references (besides when an upload needs room).
const imageGCInterval = 10 * time.Minute

var (
	_ api.ImageBackend     = (*Controller)(nil)
	_ api.NodeImageBackend = (*Controller)(nil)
)

// imagesDir is the image store's directory.
func (c Config) imagesDir() string { return filepath.Join(c.DataDir, "images") }

// openImages opens the image store and loads the fleet secret nodes
// authenticate against.
func (c *Controller) openImages() error {
	secret, err := credential.LoadOrCreateFleetSecret(c.cfg.DataDir)
	if err != nil {
		return err
	}
	c.images, err = imagestore.Open(imagestore.Options{
		Dir: c.cfg.imagesDir(), Quota: c.cfg.ImageQuota, MaxUpload: c.cfg.ImageMaxUpload,
		GCGrace: c.cfg.ImageGCGrace, Clock: c.now, InUse: c.imagesInUse,
	})
	if err != nil {
		return err
	}
	c.downloads = newDownloadSlots(c.cfg.ImageDownloadsPerNode)
	c.fleetSecret = secret
	return nil
}

// imageGCLoop collects unreferenced images every imageGCInterval.
func (c *Controller) imageGCLoop(ctx context.Context) error {
	t := time.NewTicker(imageGCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		removed, freed, err := c.images.GC()
		if err != nil {
			c.log.Error("image store garbage collection", "err", err)
		}
		if len(removed) > 0 {
			c.log.Info("image store garbage collection", "removed", removed, "freedBytes", freed)
		}
	}
}

// imageUsers returns, by normalized image name, the daemonsets whose
// stored revisions (or the revisions nodes are told to run) reference it,
// and by digest name (imagestore.DigestName) those whose revisions pin
// it: the store keeps pinned content when its tag is pushed again.
func (c *Controller) imageUsers() map[string][]string {
	users := map[string][]string{}
	add := func(ds string, t schema.PodTemplateSpec) {
		for _, name := range slices.Concat(templateImages(t), pinnedNames(t)) {
			if !slices.Contains(users[name], ds) {
				users[name] = append(users[name], ds)
			}
		}
	}
	for _, rev := range c.state.revisionList() {
		add(rev.DaemonSet, rev.Template)
	}
	for _, key := range c.state.daemonSetKeys() {
		revs, err := c.store.ListRevisions(key)
		if err != nil {
			c.log.Error("list revisions for the image store", "daemonset", key, "err", err)
			continue
		}
		for _, rev := range revs {
			add(key, rev.Template)
		}
	}
	for _, ds := range users {
		slices.Sort(ds)
	}
	return users
}

// imagesInUse is imagestore.Options.InUse.
func (c *Controller) imagesInUse() map[string]bool {
	out := map[string]bool{}
	for name := range c.imageUsers() {
		out[name] = true
	}
	return out
}

// templateImages returns the normalized images of a template's
// containers; an image that does not parse is left out (validation
// refused it long before).
func templateImages(t schema.PodTemplateSpec) []string {
	var out []string
	for _, cs := range [][]schema.Container{t.Spec.InitContainers, t.Spec.Containers} {
		for _, ctr := range cs {
			if n, err := imagestore.Normalize(ctr.Image); err == nil && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// PushImages implements api.ImageBackend.
func (c *Controller) PushImages(ctx context.Context, archive io.Reader, name string) ([]api.Image, error) {
	images, err := c.images.Push(ctx, archive, imagestore.PushOptions{Name: name})
	if err != nil {
		return nil, apiImageError(err)
	}
	users := c.imageUsers()
	out := make([]api.Image, len(images))
	for i, im := range images {
		out[i] = imageView(im, users)
		c.log.Info("image pushed", "image", im.Name, "digest", im.Digest, "size", im.Size)
	}
	return out, nil
}

// ListImages implements api.ImageBackend.
func (c *Controller) ListImages(context.Context) (api.ImageList, error) {
	users := c.imageUsers()
	used, quota := c.images.Usage()
	out := api.ImageList{Images: []api.Image{}, Used: used, Quota: quota}
	for _, im := range c.images.Images() {
		out.Images = append(out.Images, imageView(im, users))
	}
	return out, nil
}

// RemoveImage implements api.ImageBackend.
func (c *Controller) RemoveImage(_ context.Context, name string, force bool) (api.Image, error) {
	im, err := c.images.Remove(name, force)
	if err != nil {
		return api.Image{}, apiImageError(err)
	}
	c.log.Info("image removed", "image", im.Name, "digest", im.Digest, "force", force)
	return imageView(im, c.imageUsers()), nil
}

func imageView(im imagestore.Image, users map[string][]string) api.Image {
	return api.Image{Name: im.Name, Digest: im.Digest, Size: im.Size, Layers: len(im.Layers), Pushed: im.Pushed, UsedBy: users[im.Name]}
}

// apiImageError gives an image store error the API's status.
func apiImageError(err error) error {
	for _, m := range []struct{ store, api error }{
		{imagestore.ErrNotFound, api.ErrNotFound},
		{imagestore.ErrInvalid, api.ErrInvalid},
		{imagestore.ErrDigest, api.ErrInvalid},
		{imagestore.ErrTooLarge, api.ErrTooLarge},
		{imagestore.ErrQuota, api.ErrInsufficientStorage},
		{imagestore.ErrInUse, api.ErrConflict},
	} {
		if errors.Is(err, m.store) {
			return fmt.Errorf("%w: %w", m.api, err)
		}
	}
	return err
}

// AuthenticateNode implements api.NodeImageBackend: token must be the
// node's MQTT token at its current credential epoch, as the broker checks
// it, and the node not revoked.
func (c *Controller) AuthenticateNode(node string, token []byte) bool {
	if schema.NodeNameProblem(node) != "" {
		return false
	}
	epoch, err := c.nodeEpoch(node)
	if err != nil {
		c.log.Error("read node epochs for an image fetch", "node", node, "err", err)
		return false
	}
	if !credential.TokenMatches(credential.NodeTokenAt(c.fleetSecret, node, epoch), token) {
		return false
	}
	revoked, err := credential.Revoked(c.cfg.DataDir, c.fleetSecret, node)
	if err != nil {
		c.log.Error("read revoked tokens for an image fetch", "node", node, "err", err)
		return false
	}
	return !revoked
}

// nodeImages returns what the templates node's current desired state
// references let it fetch: their images' normalized names, and the
// manifest digests their revisions pin or their images name
// (app@sha256:...).
func (c *Controller) nodeImages(node string) (names, digests map[string]bool) {
	names, digests = map[string]bool{}, map[string]bool{}
	for _, t := range c.state.nodeTemplates(node) {
		for _, n := range templateImages(t) {
			names[n] = true
			if _, d, ok := strings.Cut(n, "@"); ok {
				digests[d] = true
			}
		}
		for _, p := range revisionPins(t) {
			digests[p.Digest] = true
		}
	}
	return names, digests
}

// NodeImageManifest implements api.NodeImageBackend: by name, or with a
// digest (or a digest reference) by manifest digest.
func (c *Controller) NodeImageManifest(_ context.Context, node, image, digest string) ([]byte, string, error) {
	name, err := imagestore.Normalize(image)
	if err != nil {
		return nil, "", apiImageError(err)
	}
	if _, d, ok := strings.Cut(name, "@"); ok && digest == "" {
		digest = d
	}
	if digest != "" {
		return c.nodeManifestByDigest(node, name, digest)
	}
	if names, _ := c.nodeImages(node); !names[name] {
		return nil, "", fmt.Errorf("%w: image %s: the desired state of node %s does not reference it", api.ErrForbidden, name, node)
	}
	body, digest, err := c.images.Manifest(name)
	if err != nil {
		return nil, "", fmt.Errorf("%w (push it with: edgesetctl image push %s)", apiImageError(err), imagestore.Familiar(name))
	}
	return body, digest, nil
}

// nodeManifestByDigest returns the stored manifest of digest, if the
// revisions node's desired state runs pin it or name it.
func (c *Controller) nodeManifestByDigest(node, name, digest string) ([]byte, string, error) {
	if err := imagestore.ValidDigest(digest); err != nil {
		return nil, "", apiImageError(err)
	}
	if _, digests := c.nodeImages(node); !digests[digest] {
		return nil, "", fmt.Errorf("%w: image %s@%s: no revision the desired state of node %s runs pins or names that digest", api.ErrForbidden, name, digest, node)
	}
	body, err := c.images.ManifestByDigest(digest)
	if err != nil {
		return nil, "", fmt.Errorf("%w (it was pushed again with other content and collected, or removed: "+
			"push the pinned image again, or `edgesetctl rollout restart` to pin what the store holds now)", apiImageError(err))
	}
	return body, digest, nil
}

// OpenNodeBlob implements api.NodeImageBackend: the blob must be the
// manifest, config or a layer of an image node's desired state
// references, by name or by the digest a revision pins.
func (c *Controller) OpenNodeBlob(_ context.Context, node, digest string) (*os.File, error) {
	if err := imagestore.ValidDigest(digest); err != nil {
		return nil, apiImageError(err)
	}
	names, digests := c.nodeImages(node)
	var images []imagestore.Image
	for name := range names {
		if im, ok := c.images.Image(name); ok {
			images = append(images, im)
		}
	}
	for d := range digests {
		if im, ok := c.images.ImageByDigest(d); ok {
			images = append(images, im)
		}
	}
	for _, im := range images {
		if slices.Contains(im.Blobs(), digest) {
			f, err := c.images.OpenBlob(digest)
			return f, apiImageError(err)
		}
	}
	return nil, fmt.Errorf("%w: blob %s: no image the desired state of node %s references has it", api.ErrForbidden, digest, node)
}

// AcquireNodeDownload implements api.NodeImageBackend.
func (c *Controller) AcquireNodeDownload(node string) (func(), error) {
	return c.downloads.acquire(node)
}

// downloadSlots bounds the blob downloads each node has open at once.
type downloadSlots struct {
	max  int
	mu   sync.Mutex     // guards open
	open map[string]int // downloads in progress by node; no zero entries
}

func newDownloadSlots(max int) *downloadSlots {
	return &downloadSlots{max: max, open: map[string]int{}}
}

// acquire takes one of node's slots, or fails with api.ErrBusy.
func (d *downloadSlots) acquire(node string) (func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open[node] >= d.max {
		return nil, fmt.Errorf("%w: node %s has %d image downloads open, the most it may (image-downloads-per-node)", api.ErrBusy, node, d.max)
	}
	d.open[node]++
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.open[node]--; d.open[node] <= 0 {
				delete(d.open, node)
			}
		})
	}, nil
}

// Defaults of the image store's configuration.
const (
	DefaultImageQuota            = imagestore.DefaultQuota
	DefaultImageMaxUpload        = imagestore.DefaultMaxUpload
	DefaultImageGCGrace          = imagestore.DefaultGCGrace
	DefaultImageDownloadsPerNode = 2
)

func (c *Config) applyImageDefaults() {
	if c.ImageQuota == 0 {
		c.ImageQuota = DefaultImageQuota
	}
	if c.ImageMaxUpload == 0 {
		c.ImageMaxUpload = DefaultImageMaxUpload
	}
	zeroDefault(&c.ImageGCGrace, DefaultImageGCGrace)
	zeroDefault(&c.ImageDownloadsPerNode, DefaultImageDownloadsPerNode)
}

func (c *Config) validateImages(bad func(key, format string, args ...any)) {
	for key, v := range map[string]int64{
		"image-quota":              c.ImageQuota,
		"image-max-upload":         c.ImageMaxUpload,
		"image-gc-grace":           int64(c.ImageGCGrace),
		"image-downloads-per-node": int64(c.ImageDownloadsPerNode),
	} {
		if v < 0 {
			bad(key, "must not be negative")
		}
	}
}
