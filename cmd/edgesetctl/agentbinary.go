package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/schema"
)

// agentPackage is the main package of an edgeset agent build, as its
// build information names it.
const agentPackage = "github.com/edgeset/edgeset/cmd/edgeset-agent"

// defaultImageBinaryPath is where --image finds the agent in an image.
const defaultImageBinaryPath = "/usr/local/bin/edgeset-agent"

// agentBinary is one agent binary given to agent upgrade.
type agentBinary struct {
	source   string // what the operator named: a file, or IMAGE:PATH
	path     string // the file
	platform string // schema.AgentPlatform
	digest   string
	size     int64
}

// elfArch maps ELF machines to GOARCH.
var elfArch = map[elf.Machine]string{
	elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_ARM: "arm", elf.EM_386: "386",
	elf.EM_RISCV: "riscv64", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x",
}

// inspectAgentBinary reads the platform of the binary at path from its
// ELF header (and, for arm, its Go build information for the variant),
// checks it is an edgeset agent build, and digests it. platform, when
// set, is the operator's and must agree with the header.
func inspectAgentBinary(source, path, platform string) (agentBinary, error) {
	b := agentBinary{source: source, path: path}
	goos, goarch, err := elfPlatform(path)
	if err != nil {
		return b, fmt.Errorf("%s: %w", source, err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return b, fmt.Errorf("%s: no Go build information (%v): not an edgeset-agent as make build or make cross builds it", source, err)
	}
	if info.Path != agentPackage {
		return b, fmt.Errorf("%s: not an edgeset agent: its main package is %q, not %s", source, info.Path, agentPackage)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if v := settings["GOOS"]; v != "" {
		goos = v
	}
	if v := settings["GOARCH"]; v != "" && v != goarch {
		return b, fmt.Errorf("%s: its build information says GOARCH=%s, its ELF header %s", source, v, goarch)
	}
	goarm := ""
	if goarch == "arm" && settings["GOARM"] != "" {
		goarm = settings["GOARM"][:1]
	}
	found := schema.AgentPlatform(goos, goarch, goarm)
	switch {
	case platform == "" && goarch == "arm" && goarm == "":
		return b, fmt.Errorf("%s: an arm binary whose variant is not recorded: give it, as linux-arm-v7=%s", source, path)
	case platform == "":
		b.platform = found
	default:
		gos, garch, garm, ok := schema.SplitAgentPlatform(platform)
		if !ok {
			return b, fmt.Errorf("%s: %q is not a platform such as linux-amd64, linux-arm64 or linux-arm-v7", source, platform)
		}
		if gos != goos || garch != goarch || (goarm != "" && garm != goarm) {
			return b, fmt.Errorf("%s: given as %s, but it is built for %s", source, schema.DisplayAgentPlatform(platform), schema.DisplayAgentPlatform(found))
		}
		b.platform = platform
	}
	b.digest, b.size, err = digestFile(path)
	if err != nil {
		return b, fmt.Errorf("%s: %w", source, err)
	}
	return b, nil
}

// elfPlatform reads the OS and architecture of an ELF executable.
func elfPlatform(path string) (goos, goarch string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("not an ELF executable (agents run on Linux): %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", "", fmt.Errorf("an ELF %s, not an executable", f.Type)
	}
	arch, ok := elfArch[f.Machine]
	if !ok || (f.Machine == elf.EM_PPC64 && f.Data != elf.ELFDATA2LSB) || (f.Machine == elf.EM_RISCV && f.Class != elf.ELFCLASS64) {
		return "", "", fmt.Errorf("built for %s, an architecture edgeset does not build agents for", f.Machine)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return "", "", fmt.Errorf("built for %s, not Linux", f.OSABI)
	}
	return "linux", arch, nil
}

func digestFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

// agentVersionInfo is what `edgeset-agent version --json` prints.
type agentVersionInfo struct {
	Version     string `json:"version"`
	Platform    string `json:"platform"`
	SelfUpgrade int    `json:"selfUpgrade"`
}

// agentVersion returns the version of the binaries: given, or asked of
// each binary this machine runs (`version --json`). Every binary asked
// must report it, and must be able to roll itself back.
func agentVersion(ctx context.Context, bins []agentBinary, given string) (string, error) {
	if given != "" && !schema.ValidAgentVersion(given) {
		return "", usageError{fmt.Errorf("--version %q: 1-128 letters, digits, '.', '_', '+' and '-'", given)}
	}
	version := given
	for _, b := range bins {
		goos, goarch, _, _ := schema.SplitAgentPlatform(b.platform)
		if goos != runtime.GOOS || goarch != runtime.GOARCH {
			continue
		}
		info, err := askVersion(ctx, b.path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", b.source, err)
		}
		if info.SelfUpgrade < 1 {
			return "", fmt.Errorf("%s: agent %s cannot upgrade itself nor roll itself back", b.source, info.Version)
		}
		if version != "" && info.Version != version {
			return "", fmt.Errorf("%s reports version %s, not %s", b.source, info.Version, version)
		}
		version = info.Version
	}
	if version == "" {
		return "", usageError{fmt.Errorf("give --version: none of the binaries runs on this machine (%s/%s) to say its version", runtime.GOOS, runtime.GOARCH)}
	}
	return version, nil
}

// askVersion runs `path version --json`.
func askVersion(ctx context.Context, path string) (agentVersionInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version", "--json").Output()
	if err != nil {
		return agentVersionInfo{}, fmt.Errorf("`version --json` failed (%v): an agent too old to upgrade itself, or not an agent", err)
	}
	var info agentVersionInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return agentVersionInfo{}, fmt.Errorf("`version --json` printed %q: %v", bytes.TrimSpace(out), err)
	}
	return info, nil
}

// writeAgentImage writes to w an OCI image-layout archive of one image
// whose only layer is the binary itself, byte for byte: the layer's
// digest is the binary's.
func writeAgentImage(w io.Writer, b agentBinary, version string) error {
	goos, goarch, goarm, _ := schema.SplitAgentPlatform(b.platform)
	cfg := map[string]any{"os": goos, "architecture": goarch,
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{b.digest}},
		"config": map[string]any{"Labels": map[string]string{schema.AnnotationAgentVersion: version}}}
	if goarm != "" {
		cfg["variant"] = "v" + goarm
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digestOf(cfgJSON), "size": len(cfgJSON)},
		"layers": []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": b.digest, "size": b.size}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []map[string]any{
		{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digestOf(manifest), "size": len(manifest)}}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {blobName(digestOf(cfgJSON)), cfgJSON}, {blobName(digestOf(manifest)), manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := writeTarFile(tw, blobName(b.digest), b.path, b.size); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "index.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(index))}); err != nil {
		return err
	}
	if _, err := tw.Write(index); err != nil {
		return err
	}
	return tw.Close()
}

func blobName(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeTarFile adds the file at path, of size bytes, as name.
func writeTarFile(tw *tar.Writer, name, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != size {
		err = fmt.Errorf("%s changed while it was read", path)
	}
	return err
}

// binaryFromImage saves image from the local Docker engine and extracts
// the file at inImage (an absolute path in the image's filesystem) into
// dir, returning its path.
func binaryFromImage(ctx context.Context, dockerHost, image, inImage, dir string) (string, error) {
	opts := []client.Opt{client.FromEnv}
	if dockerHost != "" {
		opts = append(opts, client.WithHost(dockerHost))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return "", fmt.Errorf("--image %s: docker engine: %w", image, err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		return "", fmt.Errorf("--image %s: the local Docker engine (%s) has no such image: %w", image, cli.DaemonHost(), err)
	}
	saved, err := cli.ImageSave(ctx, []string{image})
	if err != nil {
		return "", fmt.Errorf("--image %s: docker save: %w", image, err)
	}
	defer saved.Close()
	archive, err := os.CreateTemp(dir, "image-*.tar")
	if err != nil {
		return "", err
	}
	defer archive.Close()
	if _, err := io.Copy(archive, saved); err != nil {
		return "", fmt.Errorf("--image %s: docker save: %w", image, err)
	}
	out, err := extractFromSave(archive, inImage, dir)
	if err != nil {
		return "", fmt.Errorf("--image %s: %w", image, err)
	}
	return out, nil
}

// extractFromSave finds the file at inImage in the filesystem of the only
// image of a docker save archive (the topmost layer that has it, unless
// a layer above deletes it) and writes it into dir.
func extractFromSave(archive io.ReaderAt, inImage, dir string) (string, error) {
	var manifest []struct{ Layers []string }
	if err := readTarEntry(archive, "manifest.json", func(r io.Reader) error {
		return json.NewDecoder(io.LimitReader(r, 4<<20)).Decode(&manifest)
	}); err != nil {
		return "", fmt.Errorf("manifest.json: %w", err)
	}
	if len(manifest) != 1 {
		return "", fmt.Errorf("the archive holds %d images, want 1", len(manifest))
	}
	want := strings.TrimPrefix(path.Clean("/"+inImage), "/")
	whiteout := path.Join(path.Dir(want), ".wh."+path.Base(want))
	layers := manifest[0].Layers
	for i := len(layers) - 1; i >= 0; i-- {
		out, deleted, err := extractFromLayer(archive, layers[i], want, whiteout, dir)
		if err != nil || out != "" {
			return out, err
		}
		if deleted {
			break
		}
	}
	return "", fmt.Errorf("the image has no file %s (--image-path names where the agent is)", "/"+want)
}

// extractFromLayer looks for want in one layer: it writes it into dir
// and returns its path, or reports that the layer deletes it (whiteout).
func extractFromLayer(archive io.ReaderAt, layer, want, whiteout, dir string) (out string, deleted bool, err error) {
	err = readTarEntry(archive, layer, func(r io.Reader) error {
		br := bufio.NewReader(r)
		var src io.Reader = br
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			zr, err := gzip.NewReader(br)
			if err != nil {
				return err
			}
			defer zr.Close()
			src = zr
		}
		tr := tar.NewReader(src)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
			switch {
			case name == whiteout:
				deleted = true
			case name == want && hdr.Typeflag == tar.TypeReg:
				out, err = writeTemp(dir, tr)
				return err
			case name == want:
				return fmt.Errorf("/%s is not a regular file in layer %s (a link or directory)", want, layer)
			}
		}
	})
	return out, deleted, err
}

// readTarEntry calls fn with the content of the entry name of the tar
// archive.
func readTarEntry(archive io.ReaderAt, name string, fn func(io.Reader) error) error {
	tr := tar.NewReader(io.NewSectionReader(archive, 0, 1<<62))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("no entry %s in the archive", name)
		}
		if err != nil {
			return err
		}
		if path.Clean(hdr.Name) == path.Clean(name) {
			return fn(tr)
		}
	}
}

func writeTemp(dir string, r io.Reader) (string, error) {
	f, err := os.CreateTemp(dir, "edgeset-agent-*")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Chmod(0o755); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
