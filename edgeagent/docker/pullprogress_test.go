package docker

import (
	"testing"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/stretchr/testify/assert"
)

// TestAdvanceLayer: a pull's progress messages sum to the bytes downloaded
// of the layers being downloaded; layers already present count for
// nothing; completion makes a layer whole.
func TestAdvanceLayer(t *testing.T) {
	msgs := []jsonstream.Message{
		{ID: "2.0", Status: "Pulling from library/app"},
		{ID: "a1", Status: "Already exists"},
		{ID: "b2", Status: "Pulling fs layer"},
		{ID: "c3", Status: "Pulling fs layer"},
		{ID: "b2", Status: "Downloading", Progress: &jsonstream.Progress{Current: 100, Total: 1000}},
		{ID: "c3", Status: "Downloading", Progress: &jsonstream.Progress{Current: 50, Total: 500}},
		{ID: "b2", Status: "Downloading", Progress: &jsonstream.Progress{Current: 900, Total: 1000}},
		{ID: "b2", Status: "Verifying Checksum"},
		{ID: "b2", Status: "Download complete"},
		{ID: "c3", Status: "Downloading", Progress: &jsonstream.Progress{Current: 20, Total: 500}}, // never backwards
		{ID: "b2", Status: "Extracting", Progress: &jsonstream.Progress{Current: 10, Total: 1000}},
		{ID: "c3", Status: "Download complete"},
		{ID: "c3", Status: "Pull complete"},
		{Status: "Digest: sha256:..."},
	}
	layers := map[string]*layerBytes{}
	var order []string
	type point struct{ done, total int64 }
	var got []point
	for _, m := range msgs {
		if m.ID == "" || !advanceLayer(layers, &order, m) {
			continue
		}
		var p point
		for _, id := range order {
			p.done += layers[id].done
			p.total += layers[id].total
		}
		got = append(got, p)
	}
	assert.Equal(t, []point{{100, 1000}, {150, 1500}, {950, 1500}, {1050, 1500}, {1500, 1500}}, got)
}
