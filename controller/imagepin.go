package controller

// Images pinned by digest (docs/security.md, "Images pinned by digest").
//
// When the controller makes a new revision it pins each image of the
// template (containers and init containers) that its ImageResolver knows:
// the revision's template carries schema.ImagePinsAnnotation with the
// image's manifest and config digests, so the revision's hash, and its
// signature when signing is on, cover what the agent may run. The pins of
// a revision never change:
//
//   - an apply that leaves the effective template as it is keeps the
//     current revision, pinned or not, whatever was pushed since (a push
//     makes no revision); `rollout restart`, or any change of the
//     template, makes a new revision and pins again;
//   - an undo or retry to a template some stored revision has (without
//     its pins) returns to that revision, with the digests pinned then;
//   - the live daemonset (get -o yaml, diff) never shows the pins: they
//     are the revision's, as the config hash is.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/imagestore"
	"github.com/edgeset/edgeset/schema"
)

// ImageResolver resolves an image reference, as a container writes it, to
// the digests that fix its content. The controller's image store
// implements it (storeResolver). A registry resolver would go beside it
// (asking the registry for the tag's manifest, whose digest and config
// digest make the pin), but it is called inside the store's write
// transaction that creates the revision, so it must answer from memory:
// such a resolver would resolve ahead (on apply, before the transaction)
// and answer from what it found. No registry is reachable where edgeset
// is tested, so only the image store resolves today.
type ImageResolver interface {
	// ResolveImage returns the pin of ref, and false when it does not
	// know the image.
	ResolveImage(ref string) (schema.ImagePin, bool)
}

// storeResolver resolves the images the controller's image store holds.
type storeResolver struct{ images *imagestore.Store }

// ResolveImage implements ImageResolver: by tag, or for a digest
// reference by that manifest digest.
func (r storeResolver) ResolveImage(ref string) (schema.ImagePin, bool) {
	if r.images == nil {
		return schema.ImagePin{}, false
	}
	im, ok := r.images.Resolve(ref)
	if !ok {
		return schema.ImagePin{}, false
	}
	return schema.ImagePin{Image: ref, Digest: im.Digest, Config: im.Config.Digest}, true
}

// imageResolver is what pins the images of new revisions: the image
// store.
func (c *Controller) imageResolver() ImageResolver { return storeResolver{images: c.images} }

// pinImages returns the pins of t's images that resolver knows, in
// template order (init containers first), one per distinct reference.
func pinImages(t schema.PodTemplateSpec, resolver ImageResolver) []schema.ImagePin {
	var pins []schema.ImagePin
	for _, ref := range schema.TemplateImages(t) {
		if len(pins) == schema.MaxImagePins {
			break
		}
		if pin, ok := resolver.ResolveImage(ref); ok && pin.Image == ref {
			pins = append(pins, pin)
		}
	}
	return pins
}

// revisionTemplate decides the template of the revision that the
// effective template tmpl (without pins) becomes, given the templates of
// the daemonset's stored revisions, the current one first: the first of
// them that is tmpl once its pins are left out (its pins kept), or else
// tmpl pinned with what resolver knows (tmpl itself when it knows
// nothing). It is pure given resolver.
func revisionTemplate(tmpl schema.PodTemplateSpec, stored []schema.PodTemplateSpec, resolver ImageResolver) schema.PodTemplateSpec {
	want := schema.TemplateHash(tmpl)
	for _, s := range stored {
		if schema.TemplateHash(schema.WithImagePins(s, nil)) == want {
			return s
		}
	}
	return schema.WithImagePins(tmpl, pinImages(tmpl, resolver))
}

// pinnedTemplateTxn is revisionTemplate over the daemonset's stored
// revisions (the current one first, then the newest first). The
// reserved agent daemonset is never pinned: its revision pins the agent's
// binaries itself (schema.AnnotationAgentDigestPrefix).
func pinnedTemplateTxn(tx *store.Txn, rec store.DaemonSetRecord, tmpl schema.PodTemplateSpec, resolver ImageResolver) (schema.PodTemplateSpec, error) {
	if resolver == nil || rec.Key() == schema.AgentDaemonSet {
		return tmpl, nil
	}
	revs, err := tx.ListRevisions(rec.Key())
	if err != nil {
		return tmpl, fmt.Errorf("pin the images of daemonset %s: %w", rec.Key(), err)
	}
	slices.SortStableFunc(revs, func(a, b store.Revision) int {
		switch {
		case a.Hash == rec.CurrentRevision:
			return -1
		case b.Hash == rec.CurrentRevision:
			return 1
		}
		return int(b.Number - a.Number)
	})
	stored := make([]schema.PodTemplateSpec, len(revs))
	for i, r := range revs {
		stored[i] = r.Template
	}
	return revisionTemplate(tmpl, stored, resolver), nil
}

// isRevisionOf reports whether the daemonset's revision hash is the
// revision of the effective template tmpl: its template is tmpl once its
// pins are left out.
func isRevisionOf(tx *store.Txn, dsKey, hash string, tmpl schema.PodTemplateSpec) bool {
	want := schema.TemplateHash(tmpl)
	if hash == want {
		return true // unpinned
	}
	rev, err := tx.GetRevision(dsKey, hash)
	return err == nil && schema.TemplateHash(schema.WithImagePins(rev.Template, nil)) == want
}

// revisionPins returns the pins of a stored revision's template; a
// template whose annotation does not parse (none the controller wrote)
// has none.
func revisionPins(t schema.PodTemplateSpec) []schema.ImagePin {
	pins, err := schema.ImagePins(t)
	if err != nil {
		return nil
	}
	return pins
}

// pinnedNames returns the store names of the content t's pins fix
// (imagestore.DigestName), which the image store keeps while a revision
// pins them.
func pinnedNames(t schema.PodTemplateSpec) []string {
	var out []string
	for _, p := range revisionPins(t) {
		name, err := imagestore.Normalize(p.Image)
		if err != nil {
			continue
		}
		if dn, err := imagestore.DigestName(name, p.Digest); err == nil && !slices.Contains(out, dn) {
			out = append(out, dn)
		}
	}
	return out
}

// worstCasePins returns tmpl pinned as fully as a resolver could pin it,
// for the revision message size check.
func worstCasePins(tmpl schema.PodTemplateSpec) schema.PodTemplateSpec {
	var pins []schema.ImagePin
	digest := "sha256:" + strings.Repeat("0", 64)
	for _, ref := range schema.TemplateImages(tmpl) {
		pins = append(pins, schema.ImagePin{Image: ref, Digest: digest, Config: digest})
	}
	if len(pins) > schema.MaxImagePins {
		pins = pins[:schema.MaxImagePins]
	}
	return schema.WithImagePins(tmpl, pins)
}
