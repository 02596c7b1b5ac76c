package imagefetch

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// loadManifest is one entry of a docker-load archive's manifest.json.
type loadManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// load streams the verified blobs of m to the loader as a docker-load
// archive tagging the image as image (untagged when image is empty).
func (f *Fetcher) load(ctx context.Context, image string, m ocispec.Manifest) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := f.writeArchive(pw, image, m)
		_ = pw.CloseWithError(err)
		done <- err
	}()
	err := f.opts.Loader.LoadImage(ctx, pr)
	_ = pr.CloseWithError(fmt.Errorf("loader returned"))
	if werr := <-done; err == nil && werr != nil {
		err = werr
	}
	return err
}

// archivePath is where a blob sits in the archive.
func archivePath(d ocispec.Descriptor) string {
	return "blobs/sha256/" + strings.TrimPrefix(d.Digest.String(), "sha256:")
}

// writeArchive writes manifest.json, the config and the layers.
func (f *Fetcher) writeArchive(w io.Writer, image string, m ocispec.Manifest) error {
	lm := loadManifest{Config: archivePath(m.Config)}
	if image != "" {
		lm.RepoTags = []string{image}
	}
	for _, l := range m.Layers {
		lm.Layers = append(lm.Layers, archivePath(l))
	}
	manifest, err := json.Marshal([]loadManifest{lm})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	written := map[string]bool{}
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if written[d.Digest.String()] {
			continue
		}
		written[d.Digest.String()] = true
		if err := f.writeBlob(tw, d); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifest))}); err != nil {
		return err
	}
	if _, err := tw.Write(manifest); err != nil {
		return err
	}
	return tw.Close()
}

func (f *Fetcher) writeBlob(tw *tar.Writer, d ocispec.Descriptor) error {
	file, err := os.Open(f.blobPath(d.Digest.String()))
	if err != nil {
		return err
	}
	defer file.Close()
	if err := tw.WriteHeader(&tar.Header{Name: archivePath(d), Typeflag: tar.TypeReg, Mode: 0o644, Size: d.Size}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, file, d.Size)
	return err
}
