package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Batch signing: one Ed25519 signature covers up to MaxBatch envelopes.
// Each envelope's leaf is SHA-256(0x00 || PAE(payloadType, payload));
// leaves pair up level by level into SHA-256(0x01 || left || right), an
// odd last node rising unchanged (the tree of RFC 6962), and the key signs
// PAE(PayloadTypeBatchRoot, root). Each envelope carries the signature
// with its index, the batch size and its audit path, so it verifies alone:
// a fleet-wide change costs one signature per MaxBatch nodes, not one per
// node, and a few hashes per node.

// PayloadTypeBatchRoot is what a batch signature signs: the tree's root.
const PayloadTypeBatchRoot = "application/vnd.edgeset.batch-root.v1"

// MaxBatch is the most envelopes one batch signature covers that a
// receiver accepts; an audit path has at most maxPath hashes.
const (
	MaxBatch = 64
	maxPath  = 6
)

// BatchSize is how many envelopes a signer puts under one signature. Each
// level of the tree adds a 32-byte hash (47 bytes in the JSON) to every
// envelope of the batch, and every byte a fleet-wide change publishes is
// carried, stored and sent by the broker once per node, while a signature
// is 16-18 µs once per batch: eight make a three-hash path (141 bytes; 282
// at MaxBatch) for 2.2 µs of Ed25519 per node, which keeps signing within
// a tenth of the controller's apply to all (docs/benchmarks.md, "Batches
// of eight").
const BatchSize = 8

// BatchProof places an envelope in a signed batch.
type BatchProof struct {
	Index uint32   `json:"index"`
	Size  uint32   `json:"size"`
	Path  [][]byte `json:"path"`
}

// leafHash is SHA-256(0x00 || PAE(payloadType, payload)), hashed without
// copying payload.
func leafHash(payloadType string, payload []byte) [32]byte {
	h := sha256.New()
	var pre [64]byte
	b := append(pre[:0], 0)
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	h.Write(b)
	h.Write([]byte(payloadType))
	b = append(pre[:0], ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	h.Write(b)
	h.Write(payload)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func nodeHash(l, r []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(l)
	h.Write(r)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// batchRoot returns the root the proof leads to from leaf; ok is false
// for a malformed proof (index out of range, a path of the wrong length or
// hashes of the wrong size).
func batchRoot(leaf [32]byte, p BatchProof) (root [32]byte, ok bool) {
	if p.Size == 0 || p.Size > MaxBatch || p.Index >= p.Size || len(p.Path) > maxPath {
		return root, false
	}
	h, i, n, used := leaf, p.Index, p.Size, 0
	for n > 1 {
		switch {
		case i%2 == 1:
			if used >= len(p.Path) || len(p.Path[used]) != sha256.Size {
				return root, false
			}
			h = nodeHash(p.Path[used], h[:])
			used++
		case i+1 < n:
			if used >= len(p.Path) || len(p.Path[used]) != sha256.Size {
				return root, false
			}
			h = nodeHash(h[:], p.Path[used])
			used++
		}
		i, n = i/2, (n+1)/2
	}
	return h, used == len(p.Path)
}

// buildTree returns every level of the tree over leaves, leaves first.
func buildTree(leaves [][32]byte) [][][32]byte {
	levels := [][][32]byte{leaves}
	for cur := leaves; len(cur) > 1; {
		next := make([][32]byte, 0, (len(cur)+1)/2)
		for i := 0; i < len(cur); i += 2 {
			if i+1 < len(cur) {
				next = append(next, nodeHash(cur[i][:], cur[i+1][:]))
			} else {
				next = append(next, cur[i])
			}
		}
		levels = append(levels, next)
		cur = next
	}
	return levels
}

// auditPath returns leaf i's path in the tree levels describe.
func auditPath(levels [][][32]byte, i int) [][]byte {
	path := make([][]byte, 0, len(levels)-1)
	for _, level := range levels[:len(levels)-1] {
		sib := i ^ 1
		if sib < len(level) {
			path = append(path, level[sib][:]) // levels outlive the envelope's encoding
		}
		i /= 2
	}
	return path
}

// SignBatch signs up to MaxBatch statements with one signature and returns
// their envelopes, in order. One statement is signed alone (Sign).
func (s *Signer) SignBatch(sts []Statement) ([][]byte, error) {
	if len(sts) == 0 {
		return nil, nil
	}
	if len(sts) > MaxBatch {
		return nil, fmt.Errorf("sign batch: %d statements, at most %d", len(sts), MaxBatch)
	}
	if len(sts) == 1 {
		env, err := s.Sign(sts[0])
		return [][]byte{env}, err
	}
	payloads := make([][]byte, len(sts))
	leaves := make([][32]byte, len(sts))
	for i, st := range sts {
		if len(st.Body) == 0 {
			return nil, fmt.Errorf("encode statement for %s: no body", st.Topic)
		}
		p := appendStatement(make([]byte, 0, statementLen(st)), st)
		payloads[i], leaves[i] = p, leafHash(PayloadTypeDocument, p)
	}
	levels := buildTree(leaves)
	root := levels[len(levels)-1][0]
	sig := ed25519.Sign(s.priv, PAE(PayloadTypeBatchRoot, root[:]))
	out := make([][]byte, len(sts))
	for i, p := range payloads {
		proof := BatchProof{Index: uint32(i), Size: uint32(len(sts)), Path: auditPath(levels, i)}
		size := envelopeLen(PayloadTypeDocument, p, s.id, sig, &proof)
		out[i] = appendEnvelope(make([]byte, 0, size), PayloadTypeDocument, p, s.id, sig, &proof)
	}
	return out, nil
}

// appendEnvelope appends the JSON of an envelope of one signature, as
// encoding/json would write it, without reflection: the controller writes
// one per node per change.
func appendEnvelope(b []byte, payloadType string, payload []byte, keyID string, sig []byte, p *BatchProof) []byte {
	b = append(b, `{"payloadType":`...)
	b = appendString(b, payloadType)
	b = append(b, `,"payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, payload)
	b = append(b, `","signatures":[{"keyid":`...)
	b = appendString(b, keyID)
	b = append(b, `,"sig":"`...)
	b = base64.StdEncoding.AppendEncode(b, sig)
	b = append(b, '"')
	if p != nil {
		b = append(b, `,"batch":{"index":`...)
		b = strconv.AppendUint(b, uint64(p.Index), 10)
		b = append(b, `,"size":`...)
		b = strconv.AppendUint(b, uint64(p.Size), 10)
		b = append(b, `,"path":[`...)
		for i, h := range p.Path {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, h)
			b = append(b, '"')
		}
		b = append(b, "]}"...)
	}
	return append(b, "}]}"...)
}

// envelopeLen is the length appendEnvelope appends, exact when its
// strings need no escaping (longer ones grow the buffer): the buffer is
// allocated once, at its size, for every envelope the controller signs.
func envelopeLen(payloadType string, payload []byte, keyID string, sig []byte, p *BatchProof) int {
	enc := base64.StdEncoding.EncodedLen
	n := len(`{"payloadType":""`) + len(payloadType) +
		len(`,"payload":""`) + enc(len(payload)) +
		len(`,"signatures":[{"keyid":""`) + len(keyID) +
		len(`,"sig":""`) + enc(len(sig)) + len(`}]}`)
	if p != nil {
		n += len(`,"batch":{"index":`) + uintLen(uint64(p.Index)) +
			len(`,"size":`) + uintLen(uint64(p.Size)) + len(`,"path":[]}`)
		for i, h := range p.Path {
			if i > 0 {
				n++
			}
			n += 2 + enc(len(h))
		}
	}
	return n
}

// statementLen is the length appendStatement appends, exact when its
// strings need no escaping and its times are in UTC: RFC 3339 with
// nanoseconds, which drops trailing zeros, is at most 30 characters.
func statementLen(st Statement) int {
	return len(`{"topic":""`) + len(st.Topic) +
		len(`,"node":""`) + len(st.Node) +
		len(`,"generation":`) + uintLen(st.Generation) +
		len(`,"issuedAt":""`) + timeLen(st.IssuedAt) +
		len(`,"expiresAt":""`) + timeLen(st.ExpiresAt) +
		len(`,"body":`) + len(st.Body) + len(`}`)
}

// uintLen is the number of decimal digits of v.
func uintLen(v uint64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// timeLen is a bound of t's length in RFC 3339 with nanoseconds: exact in
// UTC for the years 0 to 9999; other zones add up to five characters.
func timeLen(t time.Time) int {
	n := len("2006-01-02T15:04:05Z")
	if ns := t.Nanosecond(); ns != 0 {
		n += 1 + 9 // '.' and the digits, less the trailing zeros
		for ; ns%10 == 0; ns /= 10 {
			n--
		}
	}
	if _, off := t.Zone(); off != 0 {
		n += len("+01:00") - len("Z")
	}
	return n
}

// appendStatement appends the JSON of st as encoding/json would write it,
// Body as given (it must be one JSON value).
func appendStatement(b []byte, st Statement) []byte {
	b = append(b, `{"topic":`...)
	b = appendString(b, st.Topic)
	b = append(b, `,"node":`...)
	b = appendString(b, st.Node)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, st.Generation, 10)
	b = append(b, `,"issuedAt":"`...)
	b = st.IssuedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","expiresAt":"`...)
	b = st.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","body":`...)
	b = append(b, st.Body...)
	return append(b, '}')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
