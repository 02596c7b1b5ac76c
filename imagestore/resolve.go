package imagestore

import (
	"fmt"
	"os"

	"github.com/distribution/reference"
)

// Resolve returns the stored image a reference names, as a daemonset's
// container writes it: by its normalized name ("app:v1" finds the image
// pushed as docker.io/library/app:v1), or, for a digest reference
// ("app@sha256:..." or "app:v1@sha256:..."), the image of that manifest
// digest in that repository, whatever name it was pushed under.
func (s *Store) Resolve(ref string) (Image, bool) {
	name, err := Normalize(ref)
	if err != nil {
		return Image{}, false
	}
	repo, digest, ok := splitDigest(name)
	if !ok {
		return s.Image(name)
	}
	return s.imageByDigest(repo, digest)
}

// ImageByDigest returns an image whose manifest has digest, in any
// repository: the content is the same whichever name it was pushed under.
func (s *Store) ImageByDigest(digest string) (Image, bool) {
	return s.imageByDigest("", digest)
}

// imageByDigest returns an image of manifest digest in repository repo
// (any repository when repo is empty), the first by name.
func (s *Store) imageByDigest(repo, digest string) (Image, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found Image
	for name, im := range s.images {
		if im.Digest != digest || (found.Name != "" && found.Name < name) {
			continue
		}
		if repo != "" && repositoryOf(name) != repo {
			continue
		}
		found = im
	}
	return found, found.Name != ""
}

// repositoryOf is the repository of a normalized name, without tag or
// digest.
func repositoryOf(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return ""
	}
	return reference.TrimNamed(named).String()
}

// ManifestByDigest returns the manifest of digest, if an image of the
// store has it.
func (s *Store) ManifestByDigest(digest string) ([]byte, error) {
	im, ok := s.ImageByDigest(digest)
	if !ok {
		return nil, fmt.Errorf("manifest %s: %w", digest, ErrNotFound)
	}
	body, err := os.ReadFile(s.blobPath(im.Digest))
	if err != nil {
		return nil, fmt.Errorf("manifest %s of image %s: %w", digest, im.Name, err)
	}
	return body, nil
}
