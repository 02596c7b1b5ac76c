package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestForwardedFailuresBlockTheClient: failed authentications a standby
// forwards with a valid proof count against the client it names, so a
// client guessing tokens through a standby blocks itself, not the
// standby; without the proof (or with a forged one) they count against
// the peer, whatever X-Forwarded-For says.
func TestForwardedFailuresBlockTheClient(t *testing.T) {
	f := NewFront(Options{Token: adminToken, DeferUserTokens: true,
		Limits: Limits{AuthFailures: 2, AuthFailureWindow: time.Minute, AuthLogInterval: time.Minute}})
	send := func(token, xff, proof string) int {
		r := httptest.NewRequest("GET", "/api/v1/nodes", nil)
		r.RemoteAddr = "10.0.0.9:4000" // the standby
		r.Header.Set("Authorization", "Bearer "+token)
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
			r.Header.Set(HeaderForwardedBy, "ctl-b")
			r.Header.Set(HeaderForwardProof, proof)
		}
		w := httptest.NewRecorder()
		f.AdmitUser(w, r)
		return w.Code
	}
	good := ForwardProof(adminToken, "ctl-b")
	assert.Equal(t, http.StatusUnauthorized, send("wrong", "192.0.2.1", good))
	assert.Equal(t, http.StatusUnauthorized, send("wrong", "192.0.2.1", good))
	assert.Equal(t, http.StatusTooManyRequests, send("wrong", "192.0.2.1", good), "the guessing client is blocked")
	assert.Equal(t, http.StatusOK, send(adminToken, "192.0.2.2", good), "another client through the same standby is not")
	assert.Equal(t, http.StatusOK, send(adminToken, "", ""), "nor the standby itself")

	forged := ForwardProof("not-the-token", "ctl-b")
	assert.Equal(t, http.StatusUnauthorized, send("wrong", "192.0.2.3", forged))
	assert.Equal(t, http.StatusUnauthorized, send("wrong", "192.0.2.4", forged))
	assert.Equal(t, http.StatusTooManyRequests, send(adminToken, "192.0.2.5", forged),
		"a forged proof counts against the peer: X-Forwarded-For cannot be used to dodge the throttle")
}
