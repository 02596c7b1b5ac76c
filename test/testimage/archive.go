package testimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Archive is a docker save archive of a one-layer image built in memory,
// for tests that push to the controller's image store without an engine.
type Archive struct {
	// Bytes is the archive.
	Bytes []byte
	// Config is the sha256 of the image's config: the image ID Docker
	// reports once the archive is loaded (classic image store).
	Config string
}

// SaveArchive returns a docker save archive of image tag whose one layer
// holds a file with content; other content gives another config digest.
func SaveArchive(tag string, content []byte) (Archive, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "content", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}); err != nil {
		return Archive{}, err
	}
	if _, err := lw.Write(content); err != nil {
		return Archive{}, err
	}
	if err := lw.Close(); err != nil {
		return Archive{}, err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Cmd": []string{"/app"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + sha256Hex(layer.Bytes())}},
	})
	if err != nil {
		return Archive{}, err
	}
	configName := sha256Hex(config) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{tag}, "Layers": []string{"layer/layer.tar"}}})
	if err != nil {
		return Archive{}, err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {"layer/layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			return Archive{}, fmt.Errorf("write %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return Archive{}, fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Archive{}, err
	}
	return Archive{Bytes: out.Bytes(), Config: "sha256:" + sha256Hex(config)}, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
