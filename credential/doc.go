// Package credential is the fleet's MQTT credentials: the fleet secret kept
// in the controller's data directory, the node tokens and the controller's
// token derived from it (HMAC-SHA256), their fingerprints, and the
// revocation list. It is a leaf: the broker checks credentials with it,
// and edgesetctl mints and revokes them offline without linking the broker.
package credential

import "errors"

// Errors returned by this package; match them with errors.Is.
var (
	// ErrSecretPermissions: the fleet secret file is accessible to group or
	// others; no secret that may have leaked is used.
	ErrSecretPermissions = errors.New("fleet secret file is readable by others")
	// ErrSecretInvalid: the fleet secret file does not hold a valid secret.
	ErrSecretInvalid = errors.New("invalid fleet secret")
	// ErrInvalidRevocation: a revocation entry is neither a node name nor a
	// token fingerprint.
	ErrInvalidRevocation = errors.New("revocation entry is neither a node name nor a token fingerprint")
)
