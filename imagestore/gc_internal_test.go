package imagestore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCollectable(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	images := map[string]Image{
		"a": {Name: "a", Pushed: t0},
		"b": {Name: "b", Pushed: t0.Add(-time.Hour)},
		"c": {Name: "c", Pushed: t0.Add(50 * time.Minute)},
		"d": {Name: "d", Pushed: t0},
	}
	now := t0.Add(time.Hour)
	cases := []struct {
		name        string
		inUse, keep map[string]bool
		grace       time.Duration
		want        []string
	}{
		{"all past grace, oldest first", nil, nil, 30 * time.Minute, []string{"b", "a", "d"}},
		{"in use spared", map[string]bool{"a": true}, nil, 30 * time.Minute, []string{"b", "d"}},
		{"kept spared", nil, map[string]bool{"b": true}, 30 * time.Minute, []string{"a", "d"}},
		{"grace is inclusive", nil, nil, time.Hour, []string{"b"}},
		{"nothing past grace", nil, nil, 3 * time.Hour, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := collectable(images, tc.inUse, tc.keep, now, tc.grace)
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestUnreferencedBlobsProperty: after removing the unreferenced blobs,
// every image's blobs remain and no blob is left unreferenced.
func TestUnreferencedBlobsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	digests := []string{"sha256:1", "sha256:2", "sha256:3", "sha256:4", "sha256:5", "sha256:6"}
	for range 500 {
		images := map[string]Image{}
		for i := range r.IntN(4) {
			im := Image{Name: string(rune('a' + i)), Digest: digests[r.IntN(6)], Config: Descriptor{Digest: digests[r.IntN(6)]}}
			for range r.IntN(3) {
				im.Layers = append(im.Layers, Descriptor{Digest: digests[r.IntN(6)]})
			}
			images[im.Name] = im
		}
		blobs := map[string]int64{}
		for _, d := range digests {
			if r.IntN(2) == 0 {
				blobs[d] = 1
			}
		}
		for _, im := range images {
			for _, d := range im.Blobs() {
				blobs[d] = 1
			}
		}
		for _, d := range unreferencedBlobs(images, blobs) {
			delete(blobs, d)
		}
		referenced := map[string]bool{}
		for _, im := range images {
			for _, d := range im.Blobs() {
				referenced[d] = true
				assert.Contains(t, blobs, d)
			}
		}
		for d := range blobs {
			assert.True(t, referenced[d], "blob %s left unreferenced", d)
		}
	}
}
