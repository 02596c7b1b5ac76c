package signing

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Payload types of the envelopes.
const (
	// PayloadTypeKeySet is a KeySet signed by the fleet root.
	PayloadTypeKeySet = "application/vnd.edgeset.keyset.v1+json"
	// PayloadTypeDocument is a Statement signed by an online key.
	PayloadTypeDocument = "application/vnd.edgeset.document.v1+json"
)

// Limits of a decoded envelope.
const (
	// MaxSignatures is the most signatures an envelope may carry.
	MaxSignatures = 4
	// MaxEnvelopeSize is the largest envelope decoded, in bytes.
	MaxEnvelopeSize = 4 << 20
)

// Envelope is a DSSE envelope. Payload is base64 on the wire
// (encoding/json's []byte).
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     []byte      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one signature of an envelope, with the signer's key ID.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   []byte `json:"sig"`
	// Batch, an edgeset extension of DSSE, says Sig signs the root of a
	// batch of envelopes this one belongs to (batch.go), not its own PAE.
	Batch *BatchProof `json:"batch,omitempty"`
}

// PAE is DSSE's pre-authentication encoding of payloadType and payload:
// what each signature signs.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(payloadType) + len(payload) + 32)
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// Seal signs payload of payloadType with priv and returns the encoded
// envelope.
func Seal(priv ed25519.PrivateKey, payloadType string, payload []byte) []byte {
	pub, _ := priv.Public().(ed25519.PublicKey)
	env := Envelope{PayloadType: payloadType, Payload: payload, Signatures: []Signature{
		{KeyID: KeyID(pub), Sig: ed25519.Sign(priv, PAE(payloadType, payload))},
	}}
	b, _ := json.Marshal(env) // strings and bytes only
	return b
}

// DecodeEnvelope parses an envelope strictly: known fields only, one to
// MaxSignatures signatures, each with a key ID and an Ed25519-sized
// signature.
func DecodeEnvelope(b []byte) (Envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return Envelope{}, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(b), MaxEnvelopeSize)
	}
	var env Envelope
	if err := decodeStrict(b, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: envelope: %v", ErrMalformed, err)
	}
	if env.PayloadType == "" {
		return Envelope{}, fmt.Errorf("%w: envelope: payloadType is required", ErrMalformed)
	}
	if n := len(env.Signatures); n == 0 || n > MaxSignatures {
		return Envelope{}, fmt.Errorf("%w: envelope: %d signatures, want 1 to %d", ErrMalformed, n, MaxSignatures)
	}
	for i, s := range env.Signatures {
		if len(s.KeyID) != KeyIDLength {
			return Envelope{}, fmt.Errorf("%w: envelope: signatures[%d].keyid: %d characters, want %d", ErrMalformed, i, len(s.KeyID), KeyIDLength)
		}
		if len(s.Sig) != ed25519.SignatureSize {
			return Envelope{}, fmt.Errorf("%w: envelope: signatures[%d].sig: %d bytes, want %d", ErrMalformed, i, len(s.Sig), ed25519.SignatureSize)
		}
	}
	return env, nil
}

// IsEnvelope reports whether b looks like an envelope rather than a plain
// message: a JSON object with a payloadType. It does not verify anything.
func IsEnvelope(b []byte) bool {
	var probe struct {
		PayloadType *string `json:"payloadType"`
	}
	return json.Unmarshal(b, &probe) == nil && probe.PayloadType != nil
}

// verifiedBy returns the first signature of env by key id that verifies
// under pub; ok is false when env has a signature by id that does not
// verify, or none by id at all (found tells them apart). A nil cache
// verifies every signature.
func verifiedBy(env Envelope, id string, pub ed25519.PublicKey, cache *SignatureCache) (found, ok bool) {
	for _, s := range env.Signatures {
		if s.KeyID != id {
			continue
		}
		found = true
		var signed []byte
		if s.Batch != nil {
			root, ok := batchRoot(leafHash(env.PayloadType, env.Payload), *s.Batch)
			if !ok {
				continue
			}
			signed = PAE(PayloadTypeBatchRoot, root[:])
		} else {
			signed = PAE(env.PayloadType, env.Payload)
		}
		if cache.verify(pub, signed, s.Sig) {
			return true, true
		}
	}
	return found, false
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}
