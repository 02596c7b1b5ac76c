package sealing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// A node that registers a new key while the controller holds another one
// for it must show it holds the other one's private key: otherwise
// whoever learnt the node's token (a broker operator sees it in every
// MQTT CONNECT) could register a key of its own and read the node's next
// secrets. The controller answers such a registration with a challenge
// sealed to the registered key; the node opens it and registers again with
// what it found. The challenge is stateless: its plaintext is an expiry
// and an HMAC, under a key only the controller has, over the node, both
// key IDs and the expiry, so the controller keeps nothing between the two
// requests and an answer proves nothing but this one change.

// ProofLifetime is how long a challenge can be answered.
const ProofLifetime = 5 * time.Minute

// proofLength is an answer's length: the expiry (8 bytes) and the HMAC.
const proofLength = 8 + sha256.Size

// ErrProof: an answer that is not the one the challenge holds, or too late.
var ErrProof = errors.New("wrong or expired proof of the registered key")

// proofAnswer is what a challenge for replacing old by next on node,
// answerable until expires, holds.
func proofAnswer(macKey []byte, node string, old, next PublicKey, expires time.Time) []byte {
	exp := binary.BigEndian.AppendUint64(make([]byte, 0, proofLength), uint64(expires.Unix()))
	mac := hmac.New(sha256.New, macKey)
	mac.Write(info(purposeProof, node, old.id, next.id))
	mac.Write(exp)
	return mac.Sum(exp)
}

// SealChallenge returns the challenge that node, holding old, must answer
// to register next: an answer sealed to old, valid for ProofLifetime
// after now. macKey is the controller's own secret.
func SealChallenge(macKey []byte, node string, old, next PublicKey, now time.Time) (schema.SealedBox, error) {
	answer := proofAnswer(macKey, node, old, next, now.Add(ProofLifetime))
	return seal(old, info(purposeProof, node, next.id, old.id), answer)
}

// OpenChallenge opens a challenge sealed by SealChallenge for node's
// registration of next, with the keyring's key it names.
func (r Keyring) OpenChallenge(node string, next PublicKey, box schema.SealedBox) ([]byte, error) {
	return r.open(box, func(keyID string) []byte { return info(purposeProof, node, next.id, keyID) })
}

// CheckProof verifies answer, what node found in the challenge to replace
// old by next, at now.
func CheckProof(macKey []byte, node string, old, next PublicKey, answer []byte, now time.Time) error {
	if len(answer) != proofLength {
		return fmt.Errorf("%w: %d bytes, want %d", ErrProof, len(answer), proofLength)
	}
	expires := time.Unix(int64(binary.BigEndian.Uint64(answer[:8])), 0)
	want := proofAnswer(macKey, node, old, next, expires)
	if !hmac.Equal(want, answer) {
		return ErrProof
	}
	if !now.Before(expires) {
		return fmt.Errorf("%w: the challenge expired at %s", ErrProof, expires.UTC().Format(time.RFC3339))
	}
	return nil
}
