package imagestore_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/imagestore"
)

func pushOne(t *testing.T, s *imagestore.Store, name, content string) imagestore.Image {
	t.Helper()
	got, err := s.Push(t.Context(), bytes.NewReader(dockerSave(t, testImage{tags: []string{name}, layers: [][]byte{layerTar(t, "f", []byte(content))}})), imagestore.PushOptions{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

func TestResolve(t *testing.T) {
	s, _, _, _ := newStore(t, 0)
	app := pushOne(t, s, "registry.example:5000/team/app:v1", "app")
	other := pushOne(t, s, "other:1", "other")

	tests := []struct {
		name, ref string
		want      string // image name; "" for none
	}{
		{"tag as pushed", "registry.example:5000/team/app:v1", app.Name},
		{"short name of docker.io", "other:1", other.Name},
		{"digest reference", "registry.example:5000/team/app@" + app.Digest, app.Name},
		{"tag and digest", "registry.example:5000/team/app:v9@" + app.Digest, app.Name},
		{"digest of another repository", "registry.example:5000/team/evil@" + app.Digest, ""},
		{"unknown digest", "other@sha256:" + strings.Repeat("0", 64), ""},
		{"unknown tag", "other:2", ""},
		{"not a reference", "UPPER/case", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			im, ok := s.Resolve(tc.ref)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, im.Name)
		})
	}

	im, ok := s.ImageByDigest(app.Digest)
	require.True(t, ok)
	assert.Equal(t, app.Config, im.Config)
	body, err := s.ManifestByDigest(app.Digest)
	require.NoError(t, err)
	assert.Contains(t, string(body), app.Config.Digest)
	_, err = s.ManifestByDigest("sha256:" + strings.Repeat("0", 64))
	require.ErrorIs(t, err, imagestore.ErrNotFound)
}

func TestDigestName(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	got, err := imagestore.DigestName("docker.io/library/app:v1", d)
	require.NoError(t, err)
	assert.Equal(t, "docker.io/library/app@"+d, got)
	n, err := imagestore.Normalize(got)
	require.NoError(t, err)
	assert.Equal(t, got, n, "a digest name is normalized")
	_, err = imagestore.DigestName("docker.io/library/app:v1", "sha256:12")
	require.ErrorIs(t, err, imagestore.ErrInvalid)
}

// TestRepushKeepsPinned: pushing a tag again with other content keeps the
// old image under its digest name while a revision pins it (and only
// then), survives a reopen, and is collected once nothing pins it.
func TestRepushKeepsPinned(t *testing.T) {
	s, dir, c, u := newStore(t, 0)
	v1 := pushOne(t, s, "app:v1", "first")
	pinned, err := imagestore.DigestName(v1.Name, v1.Digest)
	require.NoError(t, err)
	u.Set(v1.Name, pinned)

	v2 := pushOne(t, s, "app:v1", "second")
	require.NotEqual(t, v1.Digest, v2.Digest)
	assert.Equal(t, v2.Digest, mustImage(t, s, "app:v1").Digest, "the tag names the new content")
	kept, ok := s.Image(pinned)
	require.True(t, ok, "the pinned content is kept under %s", pinned)
	assert.Equal(t, v1.Digest, kept.Digest)
	assert.Equal(t, v1.Pushed, kept.Pushed, "kept with its own push time")
	for _, d := range v1.Blobs() {
		assert.Equal(t, d, blobDigest(t, s, d), "blob %s of the pinned image", d)
	}
	got, ok := s.Resolve("app@" + v1.Digest)
	require.True(t, ok)
	assert.Equal(t, v1.Digest, got.Digest)

	reopened := open(t, dir, 0, c, u)
	_, ok = reopened.Image(pinned)
	assert.True(t, ok, "kept across a reopen")

	// Not pinned: a third push drops the second content, as before.
	v3 := pushOne(t, s, "app:v1", "third")
	_, err = s.OpenBlob(v2.Layers[0].Digest)
	require.ErrorIs(t, err, imagestore.ErrNotFound, "the unpinned v2 layer is swept")
	v2name, err := imagestore.DigestName(v2.Name, v2.Digest)
	require.NoError(t, err)
	_, ok = s.Image(v2name)
	assert.False(t, ok)
	assert.Equal(t, v3.Digest, mustImage(t, s, "app:v1").Digest)

	// Nothing pins v1 any more: collected after the grace period.
	u.Set(v1.Name)
	c.Add(2 * time.Minute)
	removed, _, err := s.GC()
	require.NoError(t, err)
	assert.Equal(t, []string{pinned}, removed)
}
