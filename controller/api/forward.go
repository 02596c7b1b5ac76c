package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// Headers by which an HA standby vouches for the client of a request it
// forwards (controller/ha): HeaderForwardedBy names the standby, and
// HeaderForwardProof is ForwardProof of that name under the fleet's
// shared admin token, which only the fleet's controllers hold. A request
// carrying a valid proof is throttled as its client (the last
// X-Forwarded-For entry, which the standby sets), not as the standby:
// clients that fail to authenticate through a standby, whose user tokens
// it forwards unchecked (Options.DeferUserTokens), then block only
// themselves, never the standby and everyone it forwards for.
const (
	HeaderForwardedBy  = "Edgeset-Forwarded-By"
	HeaderForwardProof = "Edgeset-Forward-Proof"
)

// ForwardProof is the HeaderForwardProof of the standby named by under
// the shared admin token.
func ForwardProof(adminToken, by string) string {
	h := hmac.New(sha256.New, []byte("edgeset-forward:"+adminToken))
	h.Write([]byte(by))
	return hex.EncodeToString(h.Sum(nil))
}

// throttleSource returns the source r's failed authentications count
// against: its peer, or the client a standby vouched for.
func (f *Front) throttleSource(r *http.Request) string {
	by, proof := r.Header.Get(HeaderForwardedBy), r.Header.Get(HeaderForwardProof)
	if by == "" || proof == "" || f.token == "" ||
		!hmac.Equal([]byte(proof), []byte(ForwardProof(f.token, by))) {
		return sourceOf(r.RemoteAddr)
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 {
		return sourceOf(r.RemoteAddr)
	}
	last := xff[len(xff)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return sourceOf(strings.TrimSpace(last))
}
