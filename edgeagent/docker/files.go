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
// missing container or file is edgeagent.ErrNotFound; a path that is not a
// regular file (a directory, a symlink) is an error naming its type.
func (r *Runtime) ReadFile(ctx context.Context, id, path string, limit int64) ([]byte, error) {
	res, err := r.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, containerErr(fmt.Sprintf("read %s in", path), id, err)
	}
	defer res.Content.Close()
	// The archive's first entry is path itself; a directory's entries
	// follow it and must not be mistaken for it.
	tr := tar.NewReader(res.Content)
	h, err := tr.Next()
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("read %s in container %s: %w", path, id, edgeagent.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("read %s in container %s: %w", path, id, err)
	case h.Typeflag != tar.TypeReg:
		return nil, fmt.Errorf("read %s in container %s: not a regular file (tar type %q)", path, id, h.Typeflag)
	}
	if limit < 0 {
		limit = 0
	}
	b, err := io.ReadAll(io.LimitReader(tr, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s in container %s: %w", path, id, err)
	}
	return b, nil
}
