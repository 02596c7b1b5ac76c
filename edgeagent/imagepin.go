package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"

	"github.com/edgeset/edgeset/schema"
)

// Images pinned by digest, the agent's side (docs/security.md, "Images
// pinned by digest"). A revision whose template carries
// schema.ImagePinsAnnotation runs a pinned image only from content with
// the pinned digest. Before creating a container the agent looks for that
// content in the engine: under the template's reference when the image
// there has the digest, else by the pinned config digest (the image ID),
// which it then creates the container from, so the tag the engine holds
// does not matter. When the engine does not hold it, the agent obtains
// it: a registry pull of the reference (unless imageSource is controller
// or the pull policy Never), then a fetch by manifest digest from the
// controller's image store (image-url); whatever arrives is checked again.
// Content it cannot match is never run: the instance is Failed with an
// ImageDigestMismatch message and node event when the engine holds other
// content under the reference, ErrImagePull when it holds none.

// ErrImageDigestMismatch: the engine holds an image under the template's
// reference whose digest is not the one its revision pins, and the pinned
// content could not be obtained.
var ErrImageDigestMismatch = errors.New("image digest mismatch")

// ImageInspector reports the identity of an image the engine holds. The
// Docker and fake runtimes implement it; a Runtime that does not cannot
// run a pinned image.
type ImageInspector interface {
	// ImageIdentity returns the identity of image (a reference or an
	// image ID); an image the engine does not hold is ErrImageNotPresent.
	ImageIdentity(ctx context.Context, image string) (ImageIdentity, error)
}

// ImageIdentity is what an engine knows of an image's content.
type ImageIdentity struct {
	// ID is the engine's image ID: the config digest with Docker's classic
	// image store, the manifest (or index) digest with its containerd
	// image store.
	ID string
	// RepoDigests are "repository@sha256:..." references of the
	// manifests the image was pulled or pushed by.
	RepoDigests []string
}

// Matches reports whether the identity is the content pin fixes: like is
// compared with like, the ID with the config digest (or, under the
// containerd image store, the manifest digest), a repo digest with the
// manifest digest.
func (id ImageIdentity) Matches(pin schema.ImagePin) bool {
	if id.ID != "" && (id.ID == pin.Config || id.ID == pin.Digest) {
		return true
	}
	for _, rd := range id.RepoDigests {
		if _, d, ok := strings.Cut(rd, "@"); ok && d == pin.Digest {
			return true
		}
	}
	return false
}

// DigestFetcher is an ImageFetcher that fetches an image by its manifest
// digest, loading it under image (edgeagent/imagefetch implements it). A
// fetcher that does not is asked by name, and what it loads is checked
// against the pin.
type DigestFetcher interface {
	FetchImageDigest(ctx context.Context, image, digest string, progress func(done, total int64)) error
}

// ImageDigestError is an image whose engine content does not match its
// pin and could not be replaced by the pinned content.
type ImageDigestError struct {
	Image string
	Pin   schema.ImagePin
	// Got is the ID of the image the engine holds under Image.
	Got string
	// Cause is why the pinned content could not be obtained, if it was
	// tried.
	Cause error
}

func (e *ImageDigestError) Error() string {
	want := e.Pin.Digest
	if e.Pin.Config != "" {
		want = "config " + e.Pin.Config + ", manifest " + e.Pin.Digest
	}
	msg := fmt.Sprintf("%v: image %s in the engine is %s, the revision pins %s: not run", ErrImageDigestMismatch, e.Image, e.Got, want)
	if e.Cause != nil {
		msg += "; the pinned image could not be obtained: " + e.Cause.Error()
	}
	return msg
}

func (e *ImageDigestError) Is(target error) bool { return target == ErrImageDigestMismatch }

func (e *ImageDigestError) Unwrap() error { return e.Cause }

// ensureImage makes the image of container c (spec) present as the pod
// template asks and returns the reference to create the container from:
// spec.Image, or for a pinned image (pins) possibly the engine's ID of
// the pinned content.
func (a *Agent) ensureImage(ctx context.Context, spec ContainerSpec, c schema.Container, source string, pins []schema.ImagePin, progress func(done, total int64)) (string, error) {
	pin, ok := schema.PinOf(pins, c.Image)
	if !ok {
		return spec.Image, a.pullImageProgress(ctx, spec, c, source, progress)
	}
	insp, ok := a.rt.(ImageInspector)
	if !ok {
		return "", fmt.Errorf("image %s is pinned to %s, and this container runtime cannot report image digests: not run", spec.Image, pin.Digest)
	}
	if ref, _, err := pinnedImage(ctx, insp, spec.Image, pin); ref != "" || err != nil {
		return ref, err
	}
	obtainErr := a.obtainPinned(ctx, spec, c, source, pin, progress)
	ref, held, err := pinnedImage(ctx, insp, spec.Image, pin)
	switch {
	case ref != "" || err != nil:
		return ref, err
	case held.ID != "":
		return "", &ImageDigestError{Image: spec.Image, Pin: pin, Got: held.ID, Cause: obtainErr}
	case obtainErr != nil:
		return "", obtainErr
	}
	return "", fmt.Errorf("image %s: the engine does not hold it after it was obtained", spec.Image)
}

// pinnedImage returns the reference under which the engine holds pin's
// content: image itself when its image has the digest, else the ID of an
// image that has (found by the config digest or the manifest digest);
// empty when the engine holds none. held is what the engine holds under
// image (zero when nothing).
func pinnedImage(ctx context.Context, insp ImageInspector, image string, pin schema.ImagePin) (ref string, held ImageIdentity, err error) {
	held, err = inspectImage(ctx, insp, image)
	if err != nil {
		return "", held, err
	}
	if held.Matches(pin) {
		return image, held, nil
	}
	for _, other := range []string{pin.Config, digestReference(image, pin.Digest)} {
		if other == "" {
			continue
		}
		id, err := inspectImage(ctx, insp, other)
		if err != nil {
			return "", held, err
		}
		if id.Matches(pin) {
			return id.ID, held, nil
		}
	}
	return "", held, nil
}

// inspectImage is ImageIdentity with an absent image as a zero identity.
func inspectImage(ctx context.Context, insp ImageInspector, image string) (ImageIdentity, error) {
	id, err := insp.ImageIdentity(ctx, image)
	if errors.Is(err, ErrImageNotPresent) {
		return ImageIdentity{}, nil
	}
	if err != nil {
		return ImageIdentity{}, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return id, nil
}

// digestReference is image's repository at digest ("app@sha256:..."),
// empty if image does not parse.
func digestReference(image, digest string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	return reference.TrimNamed(named).String() + "@" + digest
}

// obtainPinned tries to bring pin's content into the engine: a registry
// pull of the reference when the template allows one (the pinned content
// is absent, so IfNotPresent pulls too), then a fetch by digest from the
// controller. It returns why neither worked, nil once one did (the caller
// checks what arrived).
func (a *Agent) obtainPinned(ctx context.Context, spec ContainerSpec, c schema.Container, source string, pin schema.ImagePin, progress func(done, total int64)) error {
	policy := pullPolicy(c)
	var errs []error
	if source != schema.ImageSourceController && policy != schema.PullNever {
		err := a.runtimePull(ctx, spec.Image, schema.PullAlways, pullAuth(spec, a.cfg.RegistryAuth), progress)
		if err == nil {
			if insp, ok := a.rt.(ImageInspector); ok {
				if ref, _, _ := pinnedImage(ctx, insp, spec.Image, pin); ref != "" {
					return nil
				}
			}
			err = fmt.Errorf("pull image %s: the registry serves other content than the pinned %s", spec.Image, pin.Digest)
		}
		errs = append(errs, err)
	}
	switch {
	case a.cfg.Images == nil && source == schema.ImageSourceController:
		errs = append(errs, fmt.Errorf("image %s: imageSource is controller but this agent fetches no images from the controller (set image-url)", spec.Image))
	case policy == schema.PullNever && source != schema.ImageSourceController:
		errs = append(errs, fmt.Errorf("pull image %s: %w", spec.Image, ErrImageNotPresent))
	case a.cfg.Images != nil && ctx.Err() == nil:
		if err := a.fetchPinned(ctx, spec.Image, pin, progress); err != nil {
			errs = append(errs, err)
		}
	}
	return joinErrors(errs)
}

// joinErrors joins errs on one line ("a; b"), keeping each for errors.Is;
// nil for none.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], joinErrors(errs[1:]))
}

// fetchPinned fetches pin's content from the controller's image store,
// by digest when the fetcher can, loaded under image.
func (a *Agent) fetchPinned(ctx context.Context, image string, pin schema.ImagePin, progress func(done, total int64)) error {
	if df, ok := a.cfg.Images.(DigestFetcher); ok {
		return df.FetchImageDigest(ctx, image, pin.Digest, progress)
	}
	return a.fetchImage(ctx, image, progress)
}
