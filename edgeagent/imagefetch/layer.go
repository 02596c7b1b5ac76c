package imagefetch

import (
	"context"
	"fmt"
	"os"
)

// FetchLayer makes the layer of image whose digest is digest present
// under Options.Dir, downloaded (resumed across drops and restarts like
// any blob) and verified against digest, and returns its path. The caller
// pins digest from something it trusts (the agent's upgrade: a signed
// revision); a manifest that does not list it is refused with ErrDigest.
// The file stays until RemoveLayer. FetchLayer needs no Loader.
func (f *Fetcher) FetchLayer(ctx context.Context, image, digest string) (string, error) {
	if err := validDigest(digest); err != nil {
		return "", fmt.Errorf("fetch layer of image %s: %w", image, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.manifest(ctx, image, "")
	if err != nil {
		return "", fmt.Errorf("fetch layer %s of image %s from the controller: %w", digest, image, err)
	}
	for _, l := range m.Layers {
		if l.Digest.String() != digest {
			continue
		}
		if err := f.blob(ctx, l, nil); err != nil {
			return "", fmt.Errorf("fetch layer of image %s from the controller: %w", image, err)
		}
		return f.blobPath(digest), nil
	}
	return "", fmt.Errorf("fetch layer of image %s from the controller: %w: its manifest lists no layer %s", image, ErrDigest, digest)
}

// LayerProgress returns how many bytes of the layer of digest are on
// disk, downloaded or being downloaded.
func (f *Fetcher) LayerProgress(digest string) int64 {
	if validDigest(digest) != nil {
		return 0
	}
	for _, p := range []string{f.blobPath(digest), f.blobPath(digest) + ".partial"} {
		if info, err := os.Stat(p); err == nil {
			return info.Size()
		}
	}
	return 0
}

// RemoveLayer removes the layer of digest, downloaded or partial.
func (f *Fetcher) RemoveLayer(digest string) error {
	if err := validDigest(digest); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range []string{f.blobPath(digest), f.blobPath(digest) + ".partial"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove layer %s: %w", digest, err)
		}
	}
	return nil
}
