package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

// Sealed secrets (docs/protocol.md, "Sealed secrets"): the controller
// encrypts each SecretMessage to its node's X25519 key with HPKE (RFC
// 9180) and publishes a SealedSecretMessage in its place, so that neither
// the broker nor another node can read it. Package sealing does the
// cryptography; these are its wire forms.

// SealSuite names the one HPKE suite of a SealedBox: DHKEM(X25519,
// HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, single-shot base mode.
const SealSuite = "hpke-base-x25519-hkdfsha256-chacha20poly1305"

// SealedSecretMessage is a SecretMessage for Node, encrypted to Node's
// key, published retained on NodeSecretTopic(Node, Hash) in place of the
// SecretMessage. Node and Hash are in the clear (the topic names them
// anyway) and bound into the encryption, so the box opens only as this
// node's Secret of this hash; what it holds is the SecretMessage's JSON
// encoding, which the receiver decodes and checks as if it had arrived
// unsealed.
type SealedSecretMessage struct {
	SchemaVersion int       `json:"schemaVersion"`
	Node          string    `json:"node"`
	Hash          string    `json:"hash"`
	Sealed        SealedBox `json:"sealed"`
}

// SealedBox is one HPKE single-shot encryption to one key.
type SealedBox struct {
	// Suite is SealSuite.
	Suite string `json:"suite"`
	// KeyID is the ID of the recipient's public key (32 hex digits): the
	// recipient holding several keys (during a rotation) knows which
	// opens it.
	KeyID string `json:"keyId"`
	// Ciphertext is HPKE's encapsulated key (32 bytes) followed by the
	// AEAD ciphertext; base64 in JSON.
	Ciphertext []byte `json:"ciphertext"`
}

// keyIDPattern is the form of a key ID: 32 lowercase hex digits.
var keyIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// minSealedBytes is the least ciphertext a box can have: the X25519
// encapsulated key and the AEAD tag.
const minSealedBytes = 32 + 16

// DecodeSealedSecretMessage parses and checks a sealed secret payload:
// header, hash, suite, key ID and a ciphertext long enough to be one. The
// caller checks that Node is its own name, then opens the box.
func DecodeSealedSecretMessage(b []byte) (SealedSecretMessage, error) {
	var m SealedSecretMessage
	return m, decodeWire(b, &m, func(e *fieldErrors) {
		validateWireHeader(e, m.SchemaVersion, m.Node)
		validateRevisionHash(e, "hash", m.Hash)
		validateSealedBox(e, "sealed", m.Sealed)
	})
}

// ValidateSealedBox checks the form of a box (suite, key ID, length),
// naming field in its errors.
func ValidateSealedBox(field string, box SealedBox) error {
	var errs fieldErrors
	validateSealedBox(&errs, field, box)
	return errs.err()
}

func validateSealedBox(errs *fieldErrors, field string, box SealedBox) {
	if box.Suite != SealSuite {
		errs.add(field+".suite", "%q is not the suite this edgeset opens (%s)", box.Suite, SealSuite)
	}
	if !keyIDPattern.MatchString(box.KeyID) {
		errs.add(field+".keyId", "must be 32 lowercase hex digits")
	}
	if len(box.Ciphertext) < minSealedBytes {
		errs.add(field+".ciphertext", "%d bytes, shorter than an encapsulated key and a tag (%d)", len(box.Ciphertext), minSealedBytes)
	}
}

// sealedField is how a sealed secret payload starts, as Encode writes it
// and as IsSealedSecret looks for it.
var sealedField = []byte(`"sealed"`)

// IsSealedSecret reports whether b, a payload of a node's secret topic,
// is a SealedSecretMessage rather than a SecretMessage: whether its
// top-level object has a "sealed" field. It does not check the rest.
func IsSealedSecret(b []byte) bool {
	if !bytes.Contains(b, sealedField) {
		return false
	}
	var probe struct {
		Sealed json.RawMessage `json:"sealed"`
	}
	return json.Unmarshal(b, &probe) == nil && len(probe.Sealed) > 0
}

// SealedSize is the length of the SealedSecretMessage that carries a
// SecretMessage of plainLen bytes for a node of nodeLen bytes: what a
// Secret costs on the wire, for the controller's delivery limit.
func SealedSize(nodeLen, plainLen int) int {
	m := SealedSecretMessage{SchemaVersion: WireVersion, Node: string(bytes.Repeat([]byte{'n'}, nodeLen)),
		Hash: "00000000000000000000", Sealed: SealedBox{Suite: SealSuite, KeyID: "00000000000000000000000000000000",
			Ciphertext: make([]byte, minSealedBytes+plainLen)}}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("encode a sealed message: %v", err)) // a fixed, valid value
	}
	return len(b)
}
