package imagestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Bounds of an upload besides Options.MaxUpload.
const (
	// maxMetadataBytes bounds a JSON document of an archive (manifest.json,
	// index.json, an image config or manifest).
	maxMetadataBytes = 4 << 20
	// maxEntries bounds the tar entries of an archive.
	maxEntries = 100000
	// maxImages bounds the images (names) of one archive.
	maxImages = 256
	// maxLinkHops bounds the symlinks followed to resolve a path.
	maxLinkHops = 8
)

// PushOptions modify a Push.
type PushOptions struct {
	// Name, when set, names the archive's only image (an OCI layout whose
	// index carries no name, or a retag); an archive of several images is
	// refused.
	Name string
}

// staged is one regular file of an upload, received under tmp/.
type staged struct {
	file   string // path under the upload's staging directory
	digest string
	size   int64
}

// upload is an archive being received: its files by archive path.
type upload struct {
	dir   string
	files map[string]staged
	links map[string]string // archive path to the path it links to
}

// parsed is one image of an archive, before it is stored.
type parsed struct {
	name     string
	config   staged
	layers   []staged
	manifest staged // written by the store
}

// Push receives a docker save archive (optionally gzip-compressed) or an
// OCI image-layout archive from r and stores its images. Every blob is
// digested as it arrives and checked against the digest that names it
// (a blobs/sha256/<hex> path, a config's file name, a layer's diff ID); a
// blob becomes visible only after the whole archive has been received and
// checked. It returns the images stored.
func (s *Store) Push(ctx context.Context, r io.Reader, opts PushOptions) ([]Image, error) {
	dir, err := os.MkdirTemp(s.tmpDir(), "upload-")
	if err != nil {
		return nil, fmt.Errorf("push image: %w", err)
	}
	defer os.RemoveAll(dir)
	up := &upload{dir: dir, files: map[string]staged{}, links: map[string]string{}}
	if err := up.receive(ctx, &limitReader{r: r, left: s.opts.MaxUpload, max: s.opts.MaxUpload}); err != nil {
		return nil, err
	}
	images, err := up.images()
	if err != nil {
		return nil, err
	}
	if err := rename(images, opts.Name); err != nil {
		return nil, err
	}
	for i := range images {
		if err := up.writeManifest(&images[i]); err != nil {
			return nil, err
		}
	}
	return s.commit(images)
}

// rename applies PushOptions.Name and normalizes every name.
func rename(images []parsed, name string) error {
	if name != "" {
		if len(images) != 1 {
			return fmt.Errorf("push image %s: %w: the archive holds %d images, a name fits one", name, ErrInvalid, len(images))
		}
		images[0].name = name
	}
	seen := map[string]bool{}
	for i := range images {
		if images[i].name == "" {
			return fmt.Errorf("push image: %w: an image of the archive has no name (give one)", ErrInvalid)
		}
		n, err := Normalize(images[i].name)
		if err != nil {
			return fmt.Errorf("push image: %w", err)
		}
		if seen[n] {
			return fmt.Errorf("push image %s: %w: the archive names it twice", n, ErrInvalid)
		}
		seen[n] = true
		images[i].name = n
	}
	return nil
}

// limitReader fails with ErrTooLarge once more than max bytes were read.
type limitReader struct {
	r         io.Reader
	left, max int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, fmt.Errorf("push image: %w: more than %d bytes", ErrTooLarge, l.max)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, fmt.Errorf("push image: %w: more than %d bytes", ErrTooLarge, l.max)
	}
	return n, err
}

// receive reads the archive, staging every regular file and recording
// links.
func (up *upload) receive(ctx context.Context, r io.Reader) error {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("push image: %w: gzip: %v", ErrInvalid, err)
		}
		defer zr.Close()
		src = zr
	}
	tr := tar.NewReader(src)
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("push image: %w", err)
		}
		if n >= maxEntries {
			return fmt.Errorf("push image: %w: more than %d archive entries", ErrInvalid, maxEntries)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return up.readError(err)
		}
		name := cleanPath(hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeReg:
			st, err := up.stage(tr, strconv.Itoa(n))
			if err != nil {
				return up.readError(err)
			}
			up.files[name] = st
		case tar.TypeSymlink:
			up.links[name] = cleanPath(path.Join(path.Dir(name), hdr.Linkname))
		case tar.TypeLink:
			up.links[name] = cleanPath(hdr.Linkname)
		}
	}
}

// readError keeps ErrTooLarge and context errors as they are and calls
// anything else a malformed archive.
func (up *upload) readError(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("push image: %w: reading the archive: %v", ErrInvalid, err)
}

// cleanPath is an archive path without "./" or a leading "/".
func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// stage copies r into a new staging file, digesting it.
func (up *upload) stage(r io.Reader, file string) (staged, error) {
	p := filepath.Join(up.dir, file)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return staged{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return staged{}, err
	}
	return staged{file: p, digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// lookup returns the staged file at archive path p, following links.
func (up *upload) lookup(p string) (staged, error) {
	p = cleanPath(p)
	for range maxLinkHops {
		if st, ok := up.files[p]; ok {
			return st, nil
		}
		target, ok := up.links[p]
		if !ok {
			break
		}
		p = target
	}
	return staged{}, fmt.Errorf("push image: %w: the archive has no file %s", ErrInvalid, p)
}

// readJSON decodes the staged file at archive path p into v.
func (up *upload) readJSON(p string, v any) (staged, error) {
	st, err := up.lookup(p)
	if err != nil {
		return staged{}, err
	}
	if st.size > maxMetadataBytes {
		return staged{}, fmt.Errorf("push image: %w: %s is larger than %d bytes", ErrInvalid, p, maxMetadataBytes)
	}
	raw, err := os.ReadFile(st.file)
	if err != nil {
		return staged{}, fmt.Errorf("push image: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return staged{}, fmt.Errorf("push image: %w: %s: %v", ErrInvalid, p, err)
	}
	return st, nil
}

// images parses the archive: docker save's manifest.json if present,
// else an OCI layout's index.json.
func (up *upload) images() ([]parsed, error) {
	if _, err := up.lookup("manifest.json"); err == nil {
		return up.dockerImages()
	}
	if _, err := up.lookup("index.json"); err == nil {
		return up.ociImages()
	}
	return nil, fmt.Errorf("push image: %w: neither manifest.json (docker save) nor index.json (OCI image layout) in the archive", ErrInvalid)
}

// dockerManifest is one entry of docker save's manifest.json.
type dockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

func (up *upload) dockerImages() ([]parsed, error) {
	var entries []dockerManifest
	if _, err := up.readJSON("manifest.json", &entries); err != nil {
		return nil, err
	}
	var out []parsed
	for i, e := range entries {
		p, err := up.dockerImage(e)
		if err != nil {
			return nil, fmt.Errorf("manifest.json[%d] (%s): %w", i, strings.Join(e.RepoTags, ", "), err)
		}
		if len(e.RepoTags) == 0 {
			out = append(out, p)
		}
		for _, tag := range e.RepoTags {
			p.name = tag
			out = append(out, p)
		}
		if len(out) > maxImages {
			return nil, fmt.Errorf("push image: %w: more than %d images in the archive", ErrInvalid, maxImages)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("push image: %w: manifest.json lists no image", ErrInvalid)
	}
	return out, nil
}

// dockerImage checks one manifest.json entry: the config's digest against
// its file name, each layer's against the blob path that names it or the
// config's diff ID.
func (up *upload) dockerImage(e dockerManifest) (parsed, error) {
	var cfg ocispec.Image
	st, err := up.readJSON(e.Config, &cfg)
	if err != nil {
		return parsed{}, err
	}
	if err := checkNamed(e.Config, st); err != nil {
		return parsed{}, err
	}
	if len(cfg.RootFS.DiffIDs) != len(e.Layers) {
		return parsed{}, fmt.Errorf("push image: %w: config %s lists %d diff IDs for %d layers", ErrInvalid, e.Config, len(cfg.RootFS.DiffIDs), len(e.Layers))
	}
	p := parsed{config: st}
	for i, l := range e.Layers {
		lst, err := up.lookup(l)
		if err != nil {
			return parsed{}, err
		}
		if err := checkNamed(l, lst); err != nil {
			return parsed{}, err
		}
		if comp, err := compression(lst.file); err != nil {
			return parsed{}, err
		} else if comp == "" && lst.digest != cfg.RootFS.DiffIDs[i].String() {
			return parsed{}, fmt.Errorf("push image: layer %d (%s): %w: content is %s, the config's diff ID %s", i, l, ErrDigest, lst.digest, cfg.RootFS.DiffIDs[i])
		}
		p.layers = append(p.layers, lst)
	}
	return p, nil
}

// checkNamed checks a file whose archive path names a digest
// (blobs/sha256/<hex>, or <hex>.json) against its content.
func checkNamed(p string, st staged) error {
	base := strings.TrimSuffix(path.Base(p), ".json")
	if len(base) != 64 || ValidDigest("sha256:"+base) != nil {
		return nil
	}
	if want := "sha256:" + base; st.digest != want {
		return fmt.Errorf("push image: %s: %w: content is %s", p, ErrDigest, st.digest)
	}
	return nil
}

func (up *upload) ociImages() ([]parsed, error) {
	var index ocispec.Index
	if _, err := up.readJSON("index.json", &index); err != nil {
		return nil, err
	}
	var out []parsed
	for i, desc := range index.Manifests {
		if desc.MediaType == ocispec.MediaTypeImageIndex || desc.MediaType == "application/vnd.docker.distribution.manifest.list.v2+json" {
			return nil, fmt.Errorf("push image: %w: index.json manifests[%d] is a multi-platform index: save one platform", ErrInvalid, i)
		}
		var m ocispec.Manifest
		if _, err := up.readBlob(desc, &m); err != nil {
			return nil, fmt.Errorf("index.json manifests[%d]: %w", i, err)
		}
		p, err := up.ociImage(m)
		if err != nil {
			return nil, fmt.Errorf("index.json manifests[%d]: %w", i, err)
		}
		p.name = desc.Annotations["io.containerd.image.name"]
		if p.name == "" {
			p.name = desc.Annotations[ocispec.AnnotationRefName]
		}
		out = append(out, p)
		if len(out) > maxImages {
			return nil, fmt.Errorf("push image: %w: more than %d images in the archive", ErrInvalid, maxImages)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("push image: %w: index.json lists no manifest", ErrInvalid)
	}
	return out, nil
}

func (up *upload) ociImage(m ocispec.Manifest) (parsed, error) {
	cfg, err := up.blob(m.Config)
	if err != nil {
		return parsed{}, err
	}
	p := parsed{config: cfg}
	for _, l := range m.Layers {
		st, err := up.blob(l)
		if err != nil {
			return parsed{}, err
		}
		p.layers = append(p.layers, st)
	}
	return p, nil
}

// blob returns the staged blob of an OCI descriptor, checked against its
// digest and size.
func (up *upload) blob(desc ocispec.Descriptor) (staged, error) {
	d := desc.Digest.String()
	if err := ValidDigest(d); err != nil {
		return staged{}, fmt.Errorf("push image: %w", err)
	}
	p := "blobs/sha256/" + strings.TrimPrefix(d, "sha256:")
	st, err := up.lookup(p)
	if err != nil {
		return staged{}, err
	}
	if st.digest != d {
		return staged{}, fmt.Errorf("push image: %s: %w: content is %s", p, ErrDigest, st.digest)
	}
	if st.size != desc.Size {
		return staged{}, fmt.Errorf("push image: %s: %w: %d bytes, the descriptor says %d", p, ErrDigest, st.size, desc.Size)
	}
	return st, nil
}

// readBlob decodes the blob of desc into v.
func (up *upload) readBlob(desc ocispec.Descriptor, v any) (staged, error) {
	st, err := up.blob(desc)
	if err != nil {
		return staged{}, err
	}
	return up.readJSON("blobs/sha256/"+strings.TrimPrefix(st.digest, "sha256:"), v)
}

// compression names the compression of a layer file from its magic
// bytes: "gzip", "zstd", or "" for a plain tar.
func compression(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("push image: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	switch {
	case n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		return "gzip", nil
	case n == 4 && bytes.Equal(magic[:], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd", nil
	}
	return "", nil
}

// layerMediaType is the OCI media type of a layer file.
func layerMediaType(file string) (string, error) {
	comp, err := compression(file)
	switch comp {
	case "gzip":
		return ocispec.MediaTypeImageLayerGzip, err
	case "zstd":
		return ocispec.MediaTypeImageLayerZstd, err
	}
	return ocispec.MediaTypeImageLayer, err
}

// writeManifest stages the OCI manifest the store keeps for p.
func (up *upload) writeManifest(p *parsed) error {
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.Digest(p.config.digest), Size: p.config.size},
	}
	for _, l := range p.layers {
		mt, err := layerMediaType(l.file)
		if err != nil {
			return err
		}
		m.Layers = append(m.Layers, ocispec.Descriptor{MediaType: mt, Digest: digest.Digest(l.digest), Size: l.size})
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("push image %s: %w", p.name, err)
	}
	st, err := up.stage(bytes.NewReader(raw), "manifest-"+hexOf([]byte(p.name)))
	if err != nil {
		return fmt.Errorf("push image %s: %w", p.name, err)
	}
	p.manifest = st
	return nil
}
