package signing

import "errors"

// Why a document or key set is refused. Each is wrapped with what was
// found; Reason names the sentinel for counting and for the node event.
var (
	// ErrMalformed: not an envelope, or an envelope or statement that
	// does not decode strictly.
	ErrMalformed = errors.New("malformed signed document")
	// ErrUnsigned: a plain message where a signed one is required.
	ErrUnsigned = errors.New("unsigned document")
	// ErrBadSignature: a signature by a known key that does not verify.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrUnknownKey: signed only by keys the key set does not list (or no
	// key set is known yet).
	ErrUnknownKey = errors.New("signed by an unknown key")
	// ErrRevokedKey: signed by a key the key set revokes.
	ErrRevokedKey = errors.New("signed by a revoked key")
	// ErrExpiredKey: signed by a key whose delegation has expired.
	ErrExpiredKey = errors.New("signed by an expired key")
	// ErrExpired: the document's expires-at has passed.
	ErrExpired = errors.New("document expired")
	// ErrWrongTopic: the document was signed for another topic.
	ErrWrongTopic = errors.New("document for another topic")
	// ErrWrongNode: the document was signed for another node.
	ErrWrongNode = errors.New("document for another node")
	// ErrRollback: the document's generation is below the last accepted.
	ErrRollback = errors.New("generation below the last accepted")
	// ErrNotRoot: a key set not signed by the pinned root.
	ErrNotRoot = errors.New("key set not signed by the fleet root")
	// ErrDowngrade: a key set older than the one accepted, or another one
	// of the same version.
	ErrDowngrade = errors.New("key set older than the accepted one")
	// ErrReplay: a signed request (request.go) accepted before, or one
	// that may have been: issued before the receiver started, or expiring
	// no later than a request it forgot to make room.
	ErrReplay = errors.New("signed request replayed")
)

// Reasons of refusals as node event reasons, by sentinel.
var reasons = []struct {
	err    error
	reason string
}{
	{ErrMalformed, "SignedDocumentMalformed"},
	{ErrUnsigned, "SignedDocumentMissing"},
	{ErrBadSignature, "SignatureInvalid"},
	{ErrUnknownKey, "SigningKeyUnknown"},
	{ErrRevokedKey, "SigningKeyRevoked"},
	{ErrExpiredKey, "SigningKeyExpired"},
	{ErrExpired, "SignedDocumentExpired"},
	{ErrWrongTopic, "SignedDocumentWrongTopic"},
	{ErrWrongNode, "SignedDocumentWrongNode"},
	{ErrRollback, "SignedDocumentRollback"},
	{ErrNotRoot, "KeySetNotSignedByRoot"},
	{ErrDowngrade, "KeySetDowngrade"},
	{ErrReplay, "SignedRequestReplayed"},
}

// Reason returns the node event reason of a refusal (an error wrapping
// one of the sentinels above), or "SignedDocumentRefused" for any other.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "SignedDocumentRefused"
}

// Reasons lists every reason Reason returns, in a fixed order.
func Reasons() []string {
	out := make([]string, 0, len(reasons)+1)
	for _, r := range reasons {
		out = append(out, r.reason)
	}
	return append(out, "SignedDocumentRefused")
}
