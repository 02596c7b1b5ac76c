package imagestore

import (
	"slices"
	"strings"
	"time"
)

// collectable returns the names of the images garbage collection
// removes: those neither in use nor in keep, pushed more than grace before
// now, oldest first (by name among equals).
func collectable(images map[string]Image, inUse, keep map[string]bool, now time.Time, grace time.Duration) []string {
	var out []Image
	for name, im := range images {
		if inUse[name] || keep[name] || now.Sub(im.Pushed) <= grace {
			continue
		}
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b Image) int {
		if c := a.Pushed.Compare(b.Pushed); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	names := make([]string, len(out))
	for i, im := range out {
		names[i] = im.Name
	}
	return names
}

// unreferencedBlobs returns the digests in blobs that no image references,
// sorted.
func unreferencedBlobs(images map[string]Image, blobs map[string]int64) []string {
	referenced := map[string]bool{}
	for _, im := range images {
		for _, d := range im.Blobs() {
			referenced[d] = true
		}
	}
	var out []string
	for d := range blobs {
		if !referenced[d] {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}
