package edgeagent

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// ImageFetcher makes an image present in the runtime from the
// controller's image store, for devices without a registry
// (edgeagent/imagefetch implements it).
type ImageFetcher interface {
	FetchImage(ctx context.Context, image string) error
}

// pullImage makes the image of container c (spec) present. Under
// imageSource controller it is fetched from the controller when absent,
// never pulled; otherwise it is pulled by c's policy, and a failed pull
// falls back to the controller when the agent has a fetcher
// (Config.Images) and the policy allows pulling at all.
func (a *Agent) pullImage(ctx context.Context, spec ContainerSpec, c schema.Container, source string) error {
	return a.pullImageProgress(ctx, spec, c, source, nil)
}

// pullImageProgress is pullImage reporting the transfer's progress when
// the runtime or the fetcher can (ProgressPuller, ProgressFetcher) and
// progress is not nil.
func (a *Agent) pullImageProgress(ctx context.Context, spec ContainerSpec, c schema.Container, source string, progress func(done, total int64)) error {
	policy := pullPolicy(c)
	if source == schema.ImageSourceController {
		return a.fetchIfAbsent(ctx, spec.Image, progress)
	}
	err := a.runtimePull(ctx, spec.Image, policy, pullAuth(spec, a.cfg.RegistryAuth), progress)
	if err == nil || a.cfg.Images == nil || policy == schema.PullNever || ctx.Err() != nil {
		return err
	}
	if ferr := a.fetchImage(ctx, spec.Image, progress); ferr != nil {
		return fmt.Errorf("%w; %w", err, ferr)
	}
	a.log.Info("image pulled from the controller after the registry failed", "image", spec.Image, "pullError", err)
	return nil
}

// fetchIfAbsent fetches image from the controller unless the runtime
// holds it.
func (a *Agent) fetchIfAbsent(ctx context.Context, image string, progress func(done, total int64)) error {
	err := a.rt.PullImage(ctx, image, schema.PullNever, nil)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, ErrImageNotPresent):
		return err
	case a.cfg.Images == nil:
		return fmt.Errorf("image %s: imageSource is controller but this agent fetches no images from the controller (set image-url)", image)
	}
	return a.fetchImage(ctx, image, progress)
}

// runtimePull pulls through the runtime, with progress when it reports it.
func (a *Agent) runtimePull(ctx context.Context, image, policy string, auth *RegistryAuth, progress func(done, total int64)) error {
	if pp, ok := a.rt.(ProgressPuller); ok && progress != nil {
		return pp.PullImageProgress(ctx, image, policy, auth, progress)
	}
	return a.rt.PullImage(ctx, image, policy, auth)
}

// fetchImage fetches from the controller's image store, with progress
// when the fetcher reports it.
func (a *Agent) fetchImage(ctx context.Context, image string, progress func(done, total int64)) error {
	if pf, ok := a.cfg.Images.(ProgressFetcher); ok && progress != nil {
		return pf.FetchImageProgress(ctx, image, progress)
	}
	return a.cfg.Images.FetchImage(ctx, image)
}
