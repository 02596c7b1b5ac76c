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
