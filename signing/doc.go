// Package signing is edgeset's trust chain for what the controller
// publishes: Ed25519 keys, the root-signed key set that delegates the
// controller's online keys, and the DSSE envelope every desired state,
// revision and config object travels in.
//
// The fleet root key is created offline (edgesetctl keys init) and never
// reaches the controller. It signs a KeySet: a version number, the online
// public keys with their IDs and expiry, and the revoked key IDs. The
// controller signs each document with an online key; the agent, which pins
// the root's public key, verifies the key set against the root and each
// document against the key set (Verifier).
//
// An envelope is DSSE (github.com/secure-systems-lab/dsse): payloadType,
// payload bytes and signatures with key IDs, each signature over the
// pre-authentication encoding PAE(payloadType, payload). A document's
// payload is a Statement binding the topic and node it is for ("*" for a
// shared revision or ConfigMap), its generation, issued-at and expires-at,
// and the message body as published without signing. A request (an exec,
// its input, a log stream) is a statement too, short-lived, and a
// RequestGuard accepts each one once (request.go).
//
// Everything here is pure: no clock, no I/O besides the key file helpers
// in keyfile.go.
package signing
