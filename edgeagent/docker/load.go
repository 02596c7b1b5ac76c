package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// LoadImage loads a docker-load archive (docker save's layout) into the
// engine, failing with the engine's message if its progress stream
// reports an error (a layer whose content does not match the config's
// diff ID, for one). It implements imagefetch.Loader.
func (r *Runtime) LoadImage(ctx context.Context, archive io.Reader) error {
	resp, err := r.cli.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load image: %w", err)
	}
	defer resp.Close()
	dec := json.NewDecoder(resp)
	for {
		var msg jsonstream.Message
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load image: read the engine's answer: %w", err)
		}
		if msg.Error != nil {
			return fmt.Errorf("load image: %s", msg.Error.Message)
		}
	}
}
