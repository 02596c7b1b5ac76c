package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/edgeset/edgeset/edgeagent"
)

var _ edgeagent.ImageInspector = (*Runtime)(nil)

// imageIDs is what the engine knows of image content, as Docker's classic
// image store does: each reference names one image ID, and an image stays
// present by its ID (a container can be created from it) after its
// reference moves to other content, until it is removed.
type imageIDs struct {
	byRef   map[string]string // reference to image ID
	content map[string]bool   // image IDs present
	served  map[string]string // reference to the image ID a pull of it gives (SetRegistryImage)
}

func newImageIDs() imageIDs {
	return imageIDs{byRef: map[string]string{}, content: map[string]bool{}, served: map[string]string{}}
}

// servedLocked is the image ID a pull of image gives.
func (ids imageIDs) servedLocked(image string) string {
	if id, ok := ids.served[image]; ok {
		return id
	}
	return DefaultImageID(image)
}

// SetRegistryImage makes a pull of image give the content of ID id (what
// a registry serves under that reference); by default a pull gives
// DefaultImageID(image).
func (r *Runtime) SetRegistryImage(image, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids.served[image] = id
}

// DefaultImageID is the ID of an image AddImage adds or a pull brings
// (without PullImageID): a digest of its reference.
func DefaultImageID(image string) string {
	sum := sha256.Sum256([]byte("fake image " + image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// tagLocked makes image present as content id.
func (r *Runtime) tagLocked(image, id string) {
	r.images[image] = true
	r.ids.byRef[image] = id
	r.ids.content[id] = true
}

// SetImage makes image present as the content of ID id (a load of an
// archive tagging it, or a tag moved onto other content); the content it
// named before stays present by its ID.
func (r *Runtime) SetImage(image, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tagLocked(image, id)
}

// RemoveImage removes a reference, or an image ID with every reference to
// it, as docker rmi --force does.
func (r *Runtime) RemoveImage(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids.content[ref] {
		delete(r.ids.content, ref)
		for im, id := range r.ids.byRef {
			if id == ref {
				delete(r.ids.byRef, im)
				delete(r.images, im)
			}
		}
		return
	}
	id := r.ids.byRef[ref]
	delete(r.ids.byRef, ref)
	delete(r.images, ref)
	for _, other := range r.ids.byRef {
		if other == id {
			return
		}
	}
	delete(r.ids.content, id)
}

// ImageIdentity implements edgeagent.ImageInspector: a reference's image
// ID, or an ID that is present.
func (r *Runtime) ImageIdentity(ctx context.Context, image string) (edgeagent.ImageIdentity, error) {
	if err := ctx.Err(); err != nil {
		return edgeagent.ImageIdentity{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.ids.byRef[image]; ok {
		return edgeagent.ImageIdentity{ID: id}, nil
	}
	if r.ids.content[image] {
		return edgeagent.ImageIdentity{ID: image}, nil
	}
	return edgeagent.ImageIdentity{}, fmt.Errorf("image %s: %w", image, edgeagent.ErrImageNotPresent)
}
