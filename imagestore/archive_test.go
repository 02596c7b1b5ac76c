package imagestore_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// testImage is an image to write as an archive: its layers' contents.
type testImage struct {
	tags   []string
	layers [][]byte
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// layerTar returns a tar holding one file with content.
func layerTar(t testing.TB, name string, content []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// configOf is an image config listing the layers' diff IDs.
func configOf(t testing.TB, layers [][]byte) []byte {
	t.Helper()
	ids := []string{}
	for _, l := range layers {
		ids = append(ids, "sha256:"+sha(l))
	}
	raw, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Cmd": []string{"/app"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": ids},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

type archiveFile struct {
	name string
	data []byte
	link string // symlink target when set
}

func writeTar(t testing.TB, files []archiveFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data))}
		if f.link != "" {
			hdr = &tar.Header{Name: f.name, Typeflag: tar.TypeSymlink, Linkname: f.link, Mode: 0o777}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dockerSave writes images as docker save (classic layout) does:
// <config hex>.json, <layer id>/layer.tar, manifest.json last. A layer
// shared by two images is written once and linked, as docker does.
func dockerSave(t testing.TB, images ...testImage) []byte {
	t.Helper()
	var files []archiveFile
	written := map[string]string{}
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []entry
	for _, im := range images {
		cfg := configOf(t, im.layers)
		e := entry{Config: sha(cfg) + ".json", RepoTags: im.tags}
		files = append(files, archiveFile{name: e.Config, data: cfg})
		for i, l := range im.layers {
			id := sha(append([]byte(e.Config), byte(i)))
			p := id + "/layer.tar"
			if first, ok := written[sha(l)]; ok {
				files = append(files, archiveFile{name: p, link: "../" + first})
			} else {
				files = append(files, archiveFile{name: p, data: l})
				written[sha(l)] = p
			}
			e.Layers = append(e.Layers, p)
		}
		manifest = append(manifest, e)
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return writeTar(t, append(files, archiveFile{name: "manifest.json", data: raw}))
}

// ociLayout writes one image as an OCI image-layout archive whose index
// names it name (none when empty).
func ociLayout(t testing.TB, name string, layers [][]byte) []byte {
	t.Helper()
	cfg := configOf(t, layers)
	files := []archiveFile{{name: "oci-layout", data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "blobs/sha256/" + sha(cfg), data: cfg}}
	var descs []map[string]any
	for _, l := range layers {
		files = append(files, archiveFile{name: "blobs/sha256/" + sha(l), data: l})
		descs = append(descs, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + sha(l), "size": len(l)})
	}
	m, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + sha(cfg), "size": len(cfg)},
		"layers": descs})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, archiveFile{name: "blobs/sha256/" + sha(m), data: m})
	desc := map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + sha(m), "size": len(m)}
	if name != "" {
		desc["annotations"] = map[string]string{"io.containerd.image.name": name}
	}
	idx, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{desc}})
	if err != nil {
		t.Fatal(err)
	}
	return writeTar(t, append(files, archiveFile{name: "index.json", data: idx}))
}
