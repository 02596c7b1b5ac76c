// Package testimage gives container tests a local Docker engine and an image
// to run on it without any registry: RequireDocker connects (or skips),
// Build compiles test/testimage/app into a static binary and imports it as a
// one-file image (Load imports the same image into another engine, such as
// a private dockerd), and Node hands each test its own node label with
// cleanup.
//
// Set EDGESET_REQUIRE_DOCKER=1 to turn "no engine" (or anything else a
// container test needs, see Unavailable) from a skip into a failure (CI on
// machines that must have Docker).
package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

const (
	// Repository is the test image's repository; its tag is a hash of the
	// app binary, so a changed app yields a new image.
	Repository = "edgeset-test"
	// LabelTest marks containers a test creates outside the Runtime (the
	// value is the test's node name); Node's cleanup removes them.
	LabelTest = "io.edgeset.test"
	// EnvRequireDocker, set to 1, makes RequireDocker fail instead of skip.
	EnvRequireDocker = "EDGESET_REQUIRE_DOCKER"

	appPackage     = "github.com/edgeset/edgeset/test/testimage/app"
	pingTimeout    = 10 * time.Second
	buildTimeout   = 3 * time.Minute
	cleanupTimeout = 60 * time.Second
)

// build caches the one image build of this test binary.
var build struct {
	once sync.Once
	tag  string
	err  error
}

// app caches the one compilation of the app of this test binary, which
// Build and Load share.
var app struct {
	once sync.Once
	bin  []byte
	err  error
}

// RequireDocker returns a client of the engine named by the environment
// (DOCKER_HOST, default unix:///var/run/docker.sock) after a ping that also
// negotiates the API version. If no engine answers it skips the test, or
// fails it when EDGESET_REQUIRE_DOCKER=1. The client is closed at cleanup.
func RequireDocker(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		unavailable(t, os.Getenv(client.EnvOverrideHost), err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		unavailable(t, cli.DaemonHost(), err)
	}
	return cli
}

// unavailable skips or fails t because the engine at host cannot be used.
func unavailable(t testing.TB, host string, err error) {
	t.Helper()
	Unavailable(t, fmt.Sprintf("docker engine not reachable at %s: %v", host, err))
}

// Unavailable ends a test that cannot run here for reason (no engine, no
// dockerd binary, not root): it skips t, or fails it when
// EDGESET_REQUIRE_DOCKER=1.
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(EnvRequireDocker) == "1" {
		t.Fatal(reason + " (" + EnvRequireDocker + "=1)")
	}
	t.Skip(reason)
}

// Build returns the tag of the test image (Repository:<binary hash>),
// compiling the app and importing it into the engine on the first call of
// the test binary; later calls return the same tag. It skips like
// RequireDocker when no engine answers and fails the test if the build does.
func Build(t testing.TB) string {
	t.Helper()
	cli := RequireDocker(t)
	build.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		build.tag, build.err = buildImage(ctx, cli)
	})
	if build.err != nil {
		t.Fatalf("build test image: %v", build.err)
	}
	return build.tag
}

// Load returns the tag of the test image (the one Build returns) in the
// engine cli talks to, importing it there unless the engine holds it
// already. It is for engines other than RequireDocker's, such as a dockerd a
// test runs itself; the app is compiled once per test binary for both. It
// fails the test if compiling or importing does.
func Load(t testing.TB, cli *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	tag, err := buildImage(ctx, cli)
	if err != nil {
		t.Fatalf("load test image into the engine at %s: %v", cli.DaemonHost(), err)
	}
	return tag
}

// buildImage compiles the app (once per test binary) and imports it unless
// the engine already holds an image with the binary's hash as tag.
func buildImage(ctx context.Context, cli *client.Client) (string, error) {
	app.once.Do(func() { app.bin, app.err = compileApp(ctx) })
	bin, err := app.bin, app.err
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bin)
	tag := Repository + ":" + hex.EncodeToString(sum[:6])
	_, err = cli.ImageInspect(ctx, tag)
	switch {
	case err == nil:
		return tag, nil
	case !cerrdefs.IsNotFound(err):
		return "", fmt.Errorf("inspect image %s: %w", tag, err)
	}
	if err := importImage(ctx, cli, tag, bin); err != nil {
		return "", err
	}
	return tag, nil
}

// compileApp builds the static app binary and returns its bytes.
func compileApp(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "edgeset-testimage-")
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", appPackage, err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "app")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, appPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compile %s: %w\n%s", appPackage, err, msg)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", appPackage, err)
	}
	return bin, nil
}

// importImage imports a root filesystem holding /app and an empty /tmp as
// tag, with /app as entrypoint and "sleep" as default command.
func importImage(ctx context.Context, cli *client.Client, tag string, bin []byte) error {
	rootfs, err := rootfsTar(bin)
	if err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	resp, err := cli.ImageImport(ctx,
		client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"},
		tag,
		client.ImageImportOptions{Changes: []string{`ENTRYPOINT ["/app"]`, `CMD ["sleep"]`}})
	if err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	defer resp.Close()
	if err := drainJSON(resp); err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	return nil
}

// rootfsTar returns a tar archive with /app (the binary) and /tmp.
func rootfsTar(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	hdrs := []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: now},
		{Name: "app", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: now},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// drainJSON reads an engine progress stream to its end and returns the first
// error message it carries.
func drainJSON(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg jsonstream.Message
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return msg.Error
		}
	}
}

// Node returns a node name unique to this test (and test run), for the
// LabelNode of the containers the test creates, and registers a cleanup that
// force-removes every container labelled LabelNode or LabelTest with it.
func Node(t testing.TB, cli *client.Client) string {
	t.Helper()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	node := sanitize(t.Name()) + "-" + hex.EncodeToString(suffix[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := removeLabelled(ctx, cli, node); err != nil {
			t.Errorf("clean up containers of node %s: %v", node, err)
		}
	})
	return node
}

// ManagedLabels returns the labels marking a container as edgeset's on node.
func ManagedLabels(node string) map[string]string {
	return map[string]string{edgeagent.LabelManaged: "true", edgeagent.LabelNode: node}
}

// removeLabelled force-removes the containers carrying node as LabelNode or
// LabelTest.
func removeLabelled(ctx context.Context, cli *client.Client, node string) error {
	var errs []error
	for _, key := range []string{edgeagent.LabelNode, LabelTest} {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{
			All:     true,
			Filters: make(client.Filters).Add("label", key+"="+node),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("list containers labelled %s=%s: %w", key, node, err))
			continue
		}
		for _, c := range list.Items {
			_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sanitize turns a test name into a short, name- and label-safe string.
func sanitize(name string) string {
	name = strings.ToLower(name)
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.Trim(name, "-")
}
