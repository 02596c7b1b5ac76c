package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/test/testimage"
)

// saveArchive writes a docker save archive of one image, tag, whose
// layer holds content; tamper flips a byte of the layer after its diff ID
// is computed.
func saveArchive(t *testing.T, tag, content string, tamper bool) string {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	require.NoError(t, lw.WriteHeader(&tar.Header{Name: "file", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}))
	_, err := lw.Write([]byte(content))
	require.NoError(t, err)
	require.NoError(t, lw.Close())
	sum := sha256.Sum256(layer.Bytes())
	config := fmt.Sprintf(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}`, hex.EncodeToString(sum[:]))
	csum := sha256.Sum256([]byte(config))
	configName := hex.EncodeToString(csum[:]) + ".json"
	layerBytes := layer.Bytes()
	if tamper {
		layerBytes[len(layerBytes)/3] ^= 0xff
	}
	files := []struct {
		name string
		data []byte
	}{
		{configName, []byte(config)},
		{"l/layer.tar", layerBytes},
		{"manifest.json", []byte(fmt.Sprintf(`[{"Config":%q,"RepoTags":[%q],"Layers":["l/layer.tar"]}]`, configName, tag))},
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data))}))
		_, err := tw.Write(f.data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	path := filepath.Join(t.TempDir(), "image.tar")
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
	return path
}

func TestCLIImages(t *testing.T) {
	c := startFleet(t, 0)
	out := c.ok("image", "push", "--file", saveArchive(t, "exporter:1", "v1", false))
	assert.Regexp(t, `^pushed exporter:1 sha256:[0-9a-f]{64} \([0-9.]+ [KM]?i?B, 1 layers\)\n$`, out)

	ls := c.ok("image", "ls")
	assert.Contains(t, ls, "exporter:1")
	assert.Contains(t, ls, "<none>")
	assert.Regexp(t, `store: .* of 10\.0 GiB used`, ls)

	c.ok("apply", "-f", manifest(t, "exporter:1"))
	assert.Contains(t, c.ok("image", "ls"), "monitoring/exporter", "ls names the daemonset using the image")

	code, _, errOut := c.run("image", "rm", "exporter:1")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "docker.io/library/exporter:1")
	assert.Contains(t, errOut, "in use")
	assert.Regexp(t, `^removed exporter:1 sha256:`, c.ok("image", "rm", "--force", "exporter:1"))
	code, _, errOut = c.run("image", "rm", "exporter:1")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "not in the image store")

	code, _, errOut = c.run("image", "push", "--file", saveArchive(t, "bad:1", "corrupt me", true))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "digest mismatch")
	assert.Contains(t, errOut, "layer 0 (l/layer.tar)")
	assert.NotContains(t, c.ok("image", "ls"), "bad:1", "a refused push stores nothing")

	code, _, errOut = c.run("image", "push")
	assert.Equal(t, exitUsage, code, errOut)
	code, _, errOut = c.run("image", "push", "app:1", "--file", "x.tar")
	assert.Equal(t, exitUsage, code, errOut)
	code, _, errOut = c.run("image", "push", "--file", filepath.Join(t.TempDir(), "missing.tar"))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "missing.tar")
}

// TestCLIImagePushFromEngine pushes the test image from the local Docker
// engine, as an operator pushes one they built.
func TestCLIImagePushFromEngine(t *testing.T) {
	testimage.RequireDocker(t)
	tag := testimage.Build(t)
	c := startFleet(t, 0)
	out := c.ok("image", "push", tag)
	assert.Contains(t, out, "pushed "+tag+" sha256:")
	assert.Contains(t, c.ok("image", "ls"), tag)
	code, _, errOut := c.run("image", "push", "edgeset-no-such-image:nope")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errOut, "has no such image")
}
