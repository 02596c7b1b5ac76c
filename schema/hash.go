package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// TemplateHash returns the content address of a pod template: the first 20
// hex digits of the SHA-256 of its canonical JSON encoding (encoding/json
// sorts map keys, so equal templates hash equally). Revisions are named by it
// and agents verify it before running a template.
func TemplateHash(t PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		// PodTemplateSpec holds only strings, numbers, maps and slices.
		panic("schema: encode template: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:20]
}
