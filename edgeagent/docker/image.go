package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// PullImage makes image present according to policy: schema.PullNever only
// checks (edgeagent.ErrImageNotPresent if absent), PullIfNotPresent (and
// "") pulls if absent, PullAlways pulls. A pull drains the engine's progress
// stream and fails with the engine's message if the stream reports an error.
func (r *Runtime) PullImage(ctx context.Context, image, policy string, auth *edgeagent.RegistryAuth) error {
	return r.PullImageProgress(ctx, image, policy, auth, nil)
}

// PullImageProgress implements edgeagent.ProgressPuller: PullImage, with
// progress (when not nil) fed from the engine's progress stream
// (pullprogress.go).
func (r *Runtime) PullImageProgress(ctx context.Context, image, policy string, auth *edgeagent.RegistryAuth, progress func(done, total int64)) error {
	switch policy {
	case schema.PullAlways:
		return r.pull(ctx, image, auth, progress)
	case schema.PullIfNotPresent, "", schema.PullNever:
	default:
		return fmt.Errorf("pull image %s: unknown pull policy %q", image, policy)
	}
	present, err := r.imagePresent(ctx, image)
	switch {
	case err != nil:
		return fmt.Errorf("pull image %s: %w", image, err)
	case present:
		return nil
	case policy == schema.PullNever:
		return fmt.Errorf("pull image %s: %w", image, edgeagent.ErrImageNotPresent)
	}
	return r.pull(ctx, image, auth, progress)
}

// ImageIdentity implements edgeagent.ImageInspector: the image's ID and
// repo digests as the engine reports them; an image it does not hold is
// edgeagent.ErrImageNotPresent, a failing engine edgeagent.ErrUnavailable.
func (r *Runtime) ImageIdentity(ctx context.Context, image string) (edgeagent.ImageIdentity, error) {
	res, err := r.cli.ImageInspect(ctx, image)
	switch {
	case cerrdefs.IsNotFound(err):
		return edgeagent.ImageIdentity{}, fmt.Errorf("image %s: %w", image, edgeagent.ErrImageNotPresent)
	case unavailable(err):
		return edgeagent.ImageIdentity{}, fmt.Errorf("inspect image %s: %w: %w", image, edgeagent.ErrUnavailable, err)
	case err != nil:
		return edgeagent.ImageIdentity{}, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return edgeagent.ImageIdentity{ID: res.ID, RepoDigests: res.RepoDigests}, nil
}

// imagePresent reports whether the engine holds image.
func (r *Runtime) imagePresent(ctx context.Context, image string) (bool, error) {
	_, err := r.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("inspect image: %w", err)
}

// pull pulls image, draining the progress stream (into progress, when not
// nil).
func (r *Runtime) pull(ctx context.Context, image string, auth *edgeagent.RegistryAuth, progress func(done, total int64)) error {
	opts, err := pullOptions(auth)
	if err != nil {
		return fmt.Errorf("pull image %s: %w", image, err)
	}
	resp, err := r.cli.ImagePull(ctx, image, opts)
	if err != nil {
		return fmt.Errorf("pull image %s: %w", image, err)
	}
	defer resp.Close()
	if progress != nil {
		err = drainProgress(ctx, resp, progress)
	} else {
		err = resp.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("pull image %s: %w", image, err)
	}
	return nil
}

// pullOptions encodes auth for the X-Registry-Auth header.
func pullOptions(auth *edgeagent.RegistryAuth) (client.ImagePullOptions, error) {
	if auth == nil {
		return client.ImagePullOptions{}, nil
	}
	encoded, err := authconfig.Encode(registry.AuthConfig{
		Username:      auth.Username,
		Password:      auth.Password,
		ServerAddress: auth.Server,
	})
	if err != nil {
		return client.ImagePullOptions{}, fmt.Errorf("encode registry auth for %s: %w", auth.Server, err)
	}
	return client.ImagePullOptions{RegistryAuth: encoded}, nil
}
