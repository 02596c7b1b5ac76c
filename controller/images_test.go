package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/imagestore"
	"github.com/edgeset/edgeset/schema"
)

func TestDownloadSlots(t *testing.T) {
	d := newDownloadSlots(2)
	r1, err := d.acquire("a")
	require.NoError(t, err)
	r2, err := d.acquire("a")
	require.NoError(t, err)
	_, err = d.acquire("a")
	require.ErrorIs(t, err, api.ErrBusy)
	assert.Contains(t, err.Error(), "node a")
	rb, err := d.acquire("b")
	require.NoError(t, err, "another node has slots of its own")
	r1()
	r1() // a second release is harmless
	r3, err := d.acquire("a")
	require.NoError(t, err)
	for _, r := range []func(){r2, r3, rb} {
		r()
	}
	assert.Empty(t, d.open, "no entry is kept for a node without downloads")
}

func TestTemplateImages(t *testing.T) {
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		InitContainers: []schema.Container{{Image: "init:1"}},
		Containers:     []schema.Container{{Image: "app:v1"}, {Image: "docker.io/library/app:v1"}, {Image: "registry.example/x"}},
	}}
	assert.Equal(t, []string{"docker.io/library/init:1", "docker.io/library/app:v1", "registry.example/x:latest"}, templateImages(tmpl))
}

func TestAPIImageError(t *testing.T) {
	cases := []struct{ store, api error }{
		{imagestore.ErrNotFound, api.ErrNotFound},
		{imagestore.ErrDigest, api.ErrInvalid},
		{imagestore.ErrTooLarge, api.ErrTooLarge},
		{imagestore.ErrQuota, api.ErrInsufficientStorage},
		{imagestore.ErrInUse, api.ErrConflict},
	}
	for _, c := range cases {
		err := apiImageError(errors.Join(c.store))
		assert.ErrorIs(t, err, c.api, "%v", c.store)
		assert.ErrorIs(t, err, c.store, "the store's error is kept")
	}
}

func TestImageConfigValidation(t *testing.T) {
	cfg := Config{ImageQuota: -1, ImageDownloadsPerNode: -2}
	cfg.ApplyDefaults()
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "image-quota: must not be negative")
	assert.Contains(t, err.Error(), "image-downloads-per-node: must not be negative")

	cfg = Config{}
	cfg.ApplyDefaults()
	assert.Equal(t, int64(DefaultImageQuota), cfg.ImageQuota)
	assert.Equal(t, DefaultImageDownloadsPerNode, cfg.ImageDownloadsPerNode)
}
