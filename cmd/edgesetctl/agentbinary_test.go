package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/imagestore"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// TestInspectAgentBinary reads the platform and version of a real agent
// build and turns away what is not one.
func TestInspectAgentBinary(t *testing.T) {
	bin := buildAgentVersion(t, "v9")
	host := schema.AgentPlatform("linux", runtime.GOARCH, "")
	b, err := inspectAgentBinary(bin, bin, "")
	require.NoError(t, err)
	assert.Equal(t, host, b.platform)
	digest, err := fileSHA256(bin)
	require.NoError(t, err)
	assert.Equal(t, digest, b.digest)

	version, err := agentVersion(t.Context(), []agentBinary{b}, "")
	require.NoError(t, err)
	assert.Equal(t, "v9", version, "asked of the binary, which runs here")
	_, err = agentVersion(t.Context(), []agentBinary{b}, "v8")
	assert.ErrorContains(t, err, "reports version v9, not v8")
	foreign := agentBinary{source: "arm", platform: "linux-riscv64"}
	if runtime.GOARCH == "riscv64" {
		foreign.platform = "linux-arm64"
	}
	_, err = agentVersion(t.Context(), []agentBinary{foreign}, "")
	assert.ErrorContains(t, err, "give --version: none of the binaries runs on this machine")
	version, err = agentVersion(t.Context(), []agentBinary{foreign}, "v10")
	require.NoError(t, err)
	assert.Equal(t, "v10", version)

	other := "linux-arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux-amd64"
	}
	_, err = inspectAgentBinary(bin, bin, other)
	assert.ErrorContains(t, err, "given as "+schema.DisplayAgentPlatform(other)+", but it is built for "+schema.DisplayAgentPlatform(host))

	self, err := os.Executable() // this test: a Go binary, not an agent
	require.NoError(t, err)
	_, err = inspectAgentBinary("test", self, "")
	assert.ErrorContains(t, err, "not an edgeset agent: its main package is")

	text := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("hello"), 0o644))
	_, err = inspectAgentBinary(text, text, "")
	assert.ErrorContains(t, err, "not an ELF executable")

	c := startFleet(t, 0)
	code, _, stderr := c.run("agent", "upgrade", "--file", bin, "--file", host+"="+bin)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "are both for "+schema.DisplayAgentPlatform(host)+": give one binary per platform")
	code, _, stderr = c.run("agent", "upgrade")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "give --file PATH or --image IMAGE")
	code, _, stderr = c.run("agent", "upgrade", "--file", text)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "--file "+text+": not an ELF executable")
	assert.Contains(t, c.ok("agent", "status"), "no agent upgrade yet")
}

// TestAgentImageInStore: the archive agent upgrade pushes stores the
// binary, byte for byte, as the image's only layer.
func TestAgentImageInStore(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "edgeset-agent")
	content := bytes.Repeat([]byte("\x7fELF agent "), 10000)
	require.NoError(t, os.WriteFile(bin, content, 0o755))
	digest, size, err := digestFile(bin)
	require.NoError(t, err)
	b := agentBinary{source: bin, path: bin, platform: "linux-arm-v7", digest: digest, size: size}
	var archive bytes.Buffer
	require.NoError(t, writeAgentImage(&archive, b, "v2"))

	store, err := imagestore.Open(imagestore.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	name := schema.AgentBinaryImage("v2", b.platform, digest)
	images, err := store.Push(context.Background(), &archive, imagestore.PushOptions{Name: name})
	require.NoError(t, err)
	require.Len(t, images, 1)
	require.Len(t, images[0].Layers, 1)
	assert.Equal(t, digest, images[0].Layers[0].Digest)
	assert.Equal(t, size, images[0].Layers[0].Size)
	f, err := store.OpenBlob(digest)
	require.NoError(t, err)
	defer f.Close()
	stored, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, content, stored)
}

// saveArchiveOf writes a docker save archive of one image whose layers
// hold files (path -> content; "" content with a .wh. name is a
// whiteout), the last layer gzip-compressed when gz is set.
func saveArchiveOf(t *testing.T, layers []map[string]string, gz bool) *bytes.Reader {
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	var names []string
	for i, files := range layers {
		var layer bytes.Buffer
		var w io.Writer = &layer
		var zw *gzip.Writer
		if gz && i == len(layers)-1 {
			zw = gzip.NewWriter(&layer)
			w = zw
		}
		lw := tar.NewWriter(w)
		for name, content := range files {
			require.NoError(t, lw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(content))}))
			_, err := lw.Write([]byte(content))
			require.NoError(t, err)
		}
		require.NoError(t, lw.Close())
		if zw != nil {
			require.NoError(t, zw.Close())
		}
		name := filepath.Join("l", string(rune('a'+i)), "layer.tar")
		names = append(names, name)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(layer.Len())}))
		_, err := tw.Write(layer.Bytes())
		require.NoError(t, err)
	}
	manifest := `[{"Config":"c.json","RepoTags":["agent:v2"],"Layers":["` + names[0]
	for _, n := range names[1:] {
		manifest += `","` + n
	}
	manifest += `"]}]`
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifest))}))
	_, err := tw.Write([]byte(manifest))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	return bytes.NewReader(out.Bytes())
}

func TestExtractFromSave(t *testing.T) {
	const at = "/usr/local/bin/edgeset-agent"
	cases := []struct {
		name    string
		layers  []map[string]string
		gz      bool
		want    string
		wantErr string
	}{
		{name: "topmost layer wins", layers: []map[string]string{{"usr/local/bin/edgeset-agent": "old"}, {"./usr/local/bin/edgeset-agent": "new"}}, want: "new"},
		{name: "lower layer, gzip above", layers: []map[string]string{{"usr/local/bin/edgeset-agent": "old"}, {"etc/motd": "hi"}}, gz: true, want: "old"},
		{name: "deleted above", layers: []map[string]string{{"usr/local/bin/edgeset-agent": "old"}, {"usr/local/bin/.wh.edgeset-agent": ""}}, wantErr: "the image has no file /usr/local/bin/edgeset-agent"},
		{name: "absent", layers: []map[string]string{{"bin/sh": "sh"}}, wantErr: "the image has no file /usr/local/bin/edgeset-agent (--image-path names where the agent is)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, err := extractFromSave(saveArchiveOf(t, tc.layers, tc.gz), at, t.TempDir())
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(b))
		})
	}
}

// TestAgentBinaryFromEngine takes the agent out of an image of the local
// Docker engine, as agent upgrade --image does.
func TestAgentBinaryFromEngine(t *testing.T) {
	cli := testimage.RequireDocker(t)
	bin := buildAgentVersion(t, "v7")
	content, err := os.ReadFile(bin)
	require.NoError(t, err)
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "usr/local/bin/edgeset-agent", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(content))}))
	_, err = tw.Write(content)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	tag := "edgeset-test-agent:v7-" + filepath.Base(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &rootfs, SourceName: "-"}, tag, client.ImageImportOptions{})
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp)
	require.NoError(t, resp.Close())
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) })

	path, err := binaryFromImage(ctx, "", tag, defaultImageBinaryPath, t.TempDir())
	require.NoError(t, err)
	b, err := inspectAgentBinary(tag, path, "")
	require.NoError(t, err)
	want, err := fileSHA256(bin)
	require.NoError(t, err)
	assert.Equal(t, want, b.digest, "the binary is the one in the image")
	version, err := agentVersion(ctx, []agentBinary{b}, "")
	require.NoError(t, err)
	assert.Equal(t, "v7", version)

	_, err = binaryFromImage(ctx, "", tag, "/bin/edgeset-agent", t.TempDir())
	assert.ErrorContains(t, err, "the image has no file /bin/edgeset-agent")
	_, err = binaryFromImage(ctx, "", "edgeset-no-such-image:nope", defaultImageBinaryPath, t.TempDir())
	assert.ErrorContains(t, err, "has no such image")
}

// TestAgentDaemonSetFromFlags: a new daemonset takes every strategy flag
// (with its default); an existing one keeps what the flags do not set.
func TestAgentDaemonSetFromFlags(t *testing.T) {
	bins := []agentBinary{
		{platform: "linux-amd64", digest: "sha256:" + string(bytes.Repeat([]byte("a"), 64))},
		{platform: "linux-arm-v7", digest: "sha256:" + string(bytes.Repeat([]byte("b"), 64))},
	}
	opts := func(changed ...string) agentUpgradeOptions {
		return agentUpgradeOptions{maxUnavailable: "1", failureThreshold: "1", trialDeadline: 2 * time.Minute, trialAttempts: 3,
			flagsChanged: func(name string) bool {
				for _, c := range changed {
					if c == name {
						return true
					}
				}
				return false
			}}
	}
	ds, err := agentDaemonSet(schema.DaemonSet{}, false, opts(), "v2", bins)
	require.NoError(t, err)
	assert.Equal(t, schema.AgentDaemonSet, ds.Key())
	assert.Equal(t, "1", ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String())
	assert.Equal(t, "1", ds.Spec.Rollout.FailureThreshold.String())
	assert.Equal(t, map[string]string{schema.LabelOS: "linux"}, ds.Spec.Template.Spec.NodeSelector)
	assert.Equal(t, []string{"amd64", "arm"}, ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values)
	assert.Equal(t, "Exists", ds.Spec.Template.Spec.Tolerations[0].Operator, "the agent runs on every node")
	up, err := schema.ParseAgentUpgrade(ds.Spec.Template)
	require.NoError(t, err)
	assert.Equal(t, []string{"linux-amd64", "linux-arm-v7"}, up.Platforms())
	assert.Equal(t, 2*time.Minute, up.TrialDeadline)

	live := ds
	tenPercent := schema.FromString("10%")
	live.Spec.UpdateStrategy.RollingUpdate = &schema.RollingUpdateDaemonSet{MaxUnavailable: &tenPercent}
	live.Spec.Rollout = &schema.RolloutPolicy{MaintenanceWindows: []schema.MaintenanceWindow{{Schedule: "0 2 * * *", Duration: "2h"}}}
	next, err := agentDaemonSet(live, true, opts(), "v3", bins[:1])
	require.NoError(t, err)
	assert.Equal(t, "10%", next.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String(), "a flag not given keeps the live value")
	assert.Len(t, next.Spec.Rollout.MaintenanceWindows, 1, "windows set by apply stay")
	assert.Nil(t, next.Spec.Rollout.FailureThreshold)

	o := opts("max-unavailable", "canary", "max-unavailable-per-topology")
	o.maxUnavailable, o.canary, o.perTopology = "25%", "2", "site=1"
	next, err = agentDaemonSet(live, true, o, "v3", bins)
	require.NoError(t, err)
	assert.Equal(t, "25%", next.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String())
	assert.Equal(t, "2", next.Spec.Rollout.Canary.Nodes.String())
	assert.Equal(t, "site", next.Spec.Rollout.MaxUnavailablePerTopology.TopologyKey)
	assert.Nil(t, live.Spec.Rollout.Canary, "the live object is not modified")

	_, err = agentDaemonSet(live, true, opts("node-selector"), "v3", bins)
	var ue usageError
	assert.True(t, errors.As(err, &ue), "%v", err)
	o = opts("max-unavailable")
	o.maxUnavailable = "lots"
	_, err = agentDaemonSet(live, true, o, "v3", bins)
	assert.ErrorContains(t, err, `spec.updateStrategy.rollingUpdate.maxUnavailable: invalid value "lots"`)
}
