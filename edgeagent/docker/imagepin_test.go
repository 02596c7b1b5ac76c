package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/test/testimage"
)

// TestImageIdentity: an image loaded from a docker save archive has the
// config digest as its ID, by tag and by ID, which is what the agent
// compares a pin's config digest with; an absent image is
// ErrImageNotPresent.
func TestImageIdentity(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	tag := "edgeset-test-identity:" + hex.EncodeToString(suffix[:])
	archive, err := testimage.SaveArchive(tag, suffix[:])
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.LoadImage(t.Context(), bytes.NewReader(archive.Bytes)); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() {
		if _, err := e.cli.ImageRemove(context.Background(), archive.Config, client.ImageRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove %s: %v", tag, err)
		}
	})
	for _, ref := range []string{tag, archive.Config} {
		id, err := e.rt.ImageIdentity(t.Context(), ref)
		if err != nil {
			t.Fatalf("ImageIdentity(%s): %v", ref, err)
		}
		if id.ID != archive.Config {
			t.Errorf("ImageIdentity(%s).ID = %s, want the config digest %s", ref, id.ID, archive.Config)
		}
	}
	_, err = e.rt.ImageIdentity(t.Context(), "edgeset-test-identity:absent")
	if !errors.Is(err, edgeagent.ErrImageNotPresent) {
		t.Errorf("absent image: %v, want ErrImageNotPresent", err)
	}
}
