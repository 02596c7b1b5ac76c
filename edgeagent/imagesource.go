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
	policy := pullPolicy(c)
	if source == schema.ImageSourceController {
		return a.fetchIfAbsent(ctx, spec.Image)
	}
	err := a.rt.PullImage(ctx, spec.Image, policy, pullAuth(spec, a.cfg.RegistryAuth))
	if err == nil || a.cfg.Images == nil || policy == schema.PullNever || ctx.Err() != nil {
		return err
	}
	if ferr := a.cfg.Images.FetchImage(ctx, spec.Image); ferr != nil {
		return fmt.Errorf("%w; %w", err, ferr)
	}
	a.log.Info("image pulled from the controller after the registry failed", "image", spec.Image, "pullError", err)
	return nil
}

// fetchIfAbsent fetches image from the controller unless the runtime
// holds it.
func (a *Agent) fetchIfAbsent(ctx context.Context, image string) error {
	err := a.rt.PullImage(ctx, image, schema.PullNever, nil)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, ErrImageNotPresent):
		return err
	case a.cfg.Images == nil:
		return fmt.Errorf("image %s: imageSource is controller but this agent fetches no images from the controller (set image-url)", image)
	}
	return a.cfg.Images.FetchImage(ctx, image)
}
