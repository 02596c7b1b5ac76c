package imagestore

import (
	"fmt"

	"github.com/distribution/reference"
)

// Normalize returns the canonical form of an image reference, as Docker
// reads it: "app:v1" is "docker.io/library/app:v1", an untagged name gets
// ":latest", a digest reference keeps its digest. The store keys images by
// it, so that a daemonset's "app:v1" finds the image pushed as
// "docker.io/library/app:v1".
func Normalize(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("image name %q: %w: %v", ref, ErrInvalid, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

// Familiar returns the short form of a normalized name ("app:v1"), as
// docker prints it.
func Familiar(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name
	}
	return reference.FamiliarString(named)
}

// DigestName returns the digest reference of the manifest digest in the
// repository of the normalized name: "docker.io/library/app:v1" and
// sha256:abc... give "docker.io/library/app@sha256:abc...". The store
// keeps an image a revision pins under this name once its tag is pushed
// again with other content.
func DigestName(name, digest string) (string, error) {
	if err := ValidDigest(digest); err != nil {
		return "", err
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", fmt.Errorf("image name %q: %w: %v", name, ErrInvalid, err)
	}
	return reference.TrimNamed(named).String() + "@" + digest, nil
}

// splitDigest returns the repository and digest of a normalized digest
// reference, and false for a reference without a digest.
func splitDigest(name string) (repo, digest string, ok bool) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", "", false
	}
	d, ok := named.(reference.Digested)
	if !ok {
		return "", "", false
	}
	return reference.TrimNamed(named).String(), d.Digest().String(), true
}
