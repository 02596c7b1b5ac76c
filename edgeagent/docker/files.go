package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

// ReadFile returns up to limit bytes of the regular file at path inside the
// container, running or stopped, through the engine's archive endpoint. A
// missing container or file is edgeagent.ErrNotFound.
func (r *Runtime) ReadFile(ctx context.Context, id, path string, limit int64) ([]byte, error) {
	res, err := r.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, containerErr(fmt.Sprintf("read %s in", path), id, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s in container %s: %w", path, id, edgeagent.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s in container %s: %w", path, id, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, limit))
		if err != nil {
			return nil, fmt.Errorf("read %s in container %s: %w", path, id, err)
		}
		return b, nil
	}
}
