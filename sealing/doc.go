// Package sealing encrypts what only one device may read: each agent's
// X25519 key pair (created on the device, the private key never leaves
// it), the HPKE (RFC 9180, crypto/hpke) sealing of a Secret to a node's
// public key, and the proof a node gives that it holds the key it
// registered before, when it registers a new one.
//
// A sealed Secret is a schema.SealedBox of suite schema.SealSuite:
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, base mode,
// single shot. The HPKE info binds the purpose, the node, the Secret's
// content hash and the recipient key ID, so a box opens only as the
// Secret of that hash for that node: replayed on another node's topic or
// another hash's, it does not open.
//
// Everything here is pure but for the randomness of key generation and
// encapsulation (crypto/rand) and the key file helpers of keyfile.go.
package sealing
