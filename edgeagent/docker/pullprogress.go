package docker

import (
	"context"
	"strings"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// drainProgress reads a pull's progress stream to its end, reporting the
// bytes downloaded of the layers' total whenever they change, and returns
// the error the stream reports, if any.
//
// The engine sends one message per layer step: "Pulling fs layer",
// "Downloading" with progressDetail current/total, "Download complete",
// "Extracting", "Pull complete", or "Already exists" for a layer it has.
// A layer counts from its first "Downloading" (which tells its size) and
// is whole once "Download complete" (or "Pull complete"); layers already
// present count for nothing, so a pull that resumes counts only what it
// still transfers.
func drainProgress(ctx context.Context, resp client.ImagePullResponse, progress func(done, total int64)) error {
	layers := map[string]*layerBytes{}
	var order []string
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return msg.Error
		}
		if msg.ID == "" || !advanceLayer(layers, &order, msg) {
			continue
		}
		var done, total int64
		for _, id := range order {
			done += layers[id].done
			total += layers[id].total
		}
		progress(done, total)
	}
	return nil
}

// layerBytes is one layer's download.
type layerBytes struct{ done, total int64 }

// advanceLayer applies one progress message to its layer and reports
// whether the counts changed.
func advanceLayer(layers map[string]*layerBytes, order *[]string, msg jsonstream.Message) bool {
	l := layers[msg.ID]
	switch {
	case strings.HasPrefix(msg.Status, "Downloading") && msg.Progress != nil && msg.Progress.Total > 0:
		if l == nil {
			l = &layerBytes{}
			layers[msg.ID] = l
			*order = append(*order, msg.ID)
		}
		before := *l
		l.total = msg.Progress.Total
		l.done = min(max(msg.Progress.Current, l.done), l.total)
		return *l != before
	case l != nil && (msg.Status == "Download complete" || msg.Status == "Pull complete") && l.done < l.total:
		l.done = l.total
		return true
	}
	return false
}
