package schema

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ImagePinsAnnotation carries, on a revision's template, the digests that
// fix the content of its images (docs/security.md, "Images pinned by
// digest"). The controller sets it when it creates a revision, for each
// image its image store (or, one day, a registry) can resolve; an agent
// runs a pinned image only if the engine's image has the pinned digest.
//
// It is an annotation of the revision's template, as the config hash is,
// rather than a field beside the template, so that the revision's hash
// covers the pins (one topic, one content: daemonsets that share a
// template and pin other content get other revisions) and agents that
// predate pinning still decode the revision. The author's containers keep
// their image references unchanged. A manifest's own value of the
// annotation is replaced by the controller's.
const ImagePinsAnnotation = "edgeset.io/image-pins"

// MaxImagePins bounds the pins of one template (one per distinct image of
// its containers and init containers): the controller pins the first
// MaxImagePins images of a template that has more, and the rest run by
// their tags.
const MaxImagePins = 64

// ImagePin fixes the content of one image reference of a template.
type ImagePin struct {
	// Image is the reference exactly as the template's containers write
	// it ("collector:1.4").
	Image string `json:"image"`
	// Digest is the sha256 of the image's manifest: what an agent fetches
	// the image by from the controller's image store, and what a registry
	// names it by (RepoDigests).
	Digest string `json:"digest"`
	// Config is the sha256 of the image's config, which names every layer
	// by its content: the image ID Docker reports (with its classic image
	// store), the same whichever registry or archive the image came
	// through. Empty when the resolver knew only the manifest.
	Config string `json:"config,omitempty"`
}

// ImagePins returns the pins of template t, in the annotation's order;
// none without the annotation. A value that does not parse, or pins that
// fail validation, is an error naming the annotation.
func ImagePins(t PodTemplateSpec) ([]ImagePin, error) {
	v, ok := t.Metadata.Annotations[ImagePinsAnnotation]
	if !ok {
		return nil, nil
	}
	var errs fieldErrors
	pins := parseImagePins(&errs, "metadata.annotations["+ImagePinsAnnotation+"]", v, &t.Spec)
	return pins, errs.err()
}

// PinOf returns the pin of image among pins.
func PinOf(pins []ImagePin, image string) (ImagePin, bool) {
	i := slices.IndexFunc(pins, func(p ImagePin) bool { return p.Image == image })
	if i < 0 {
		return ImagePin{}, false
	}
	return pins[i], true
}

// WithImagePins returns t with pins in ImagePinsAnnotation, or without
// the annotation when pins is empty. t's annotations are copied, never
// changed in place.
func WithImagePins(t PodTemplateSpec, pins []ImagePin) PodTemplateSpec {
	annotations := make(map[string]string, len(t.Metadata.Annotations)+1)
	for k, v := range t.Metadata.Annotations {
		if k != ImagePinsAnnotation {
			annotations[k] = v
		}
	}
	if len(pins) > 0 {
		b, err := json.Marshal(pins)
		if err != nil {
			panic("schema: encode image pins: " + err.Error()) // strings only
		}
		annotations[ImagePinsAnnotation] = string(b)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	t.Metadata.Annotations = annotations
	return t
}

// TemplateImages returns the distinct image references of t's init
// containers, then its containers, in template order.
func TemplateImages(t PodTemplateSpec) []string {
	var out []string
	for _, c := range slices.Concat(t.Spec.InitContainers, t.Spec.Containers) {
		if c.Image != "" && !slices.Contains(out, c.Image) {
			out = append(out, c.Image)
		}
	}
	return out
}

// validateImagePins checks the annotation, if t carries it.
func validateImagePins(errs *fieldErrors, field string, t *PodTemplateSpec) {
	if v, ok := t.Metadata.Annotations[ImagePinsAnnotation]; ok {
		parseImagePins(errs, field+".metadata.annotations["+ImagePinsAnnotation+"]", v, &t.Spec)
	}
}

// parseImagePins decodes the annotation's value v and checks every pin:
// an image some container of spec uses, pinned once, with sha256 digests.
func parseImagePins(errs *fieldErrors, field, v string, spec *PodSpec) []ImagePin {
	var pins []ImagePin
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pins); err != nil || dec.More() {
		errs.add(field, "want a JSON list of {image, digest, config}: %v", err)
		return nil
	}
	if len(pins) == 0 || len(pins) > MaxImagePins {
		errs.add(field, "%d pins: want 1 to %d (remove the annotation for none)", len(pins), MaxImagePins)
		return nil
	}
	images := TemplateImages(PodTemplateSpec{Spec: *spec})
	before := len(*errs)
	for i, p := range pins {
		pf := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case !slices.Contains(images, p.Image):
			errs.add(pf+".image", "%q is not the image of any container", p.Image)
		case slices.ContainsFunc(pins[:i], func(q ImagePin) bool { return q.Image == p.Image }):
			errs.add(pf+".image", "%q is pinned twice", p.Image)
		}
		if !isSHA256Digest(p.Digest) {
			errs.add(pf+".digest", "%q: want sha256: and 64 lowercase hex digits", p.Digest)
		}
		if p.Config != "" && !isSHA256Digest(p.Config) {
			errs.add(pf+".config", "%q: want sha256: and 64 lowercase hex digits", p.Config)
		}
	}
	if len(*errs) > before {
		return nil
	}
	return pins
}

// isSHA256Digest reports whether d is "sha256:" and 64 lowercase hex
// digits.
func isSHA256Digest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	_, err := hex.DecodeString(h)
	return ok && len(h) == 64 && strings.ToLower(h) == h && err == nil
}
