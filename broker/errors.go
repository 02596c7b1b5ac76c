package broker

import "errors"

// Errors returned by this package; match them with errors.Is.
var (
	// ErrNoDataDir: Options.DataDir is empty.
	ErrNoDataDir = errors.New("data dir is required")
	// ErrTLSIncomplete: a TLS option is set without the others it needs.
	ErrTLSIncomplete = errors.New("incomplete TLS options")
	// ErrRunning: Run was called on a broker that is already running.
	ErrRunning = errors.New("broker already running")
	// ErrClosed: Run was called on a closed broker.
	ErrClosed = errors.New("broker closed")
)

// Reasons a connection is refused at CONNECT. They are counted in
// Stats.AuthFailures and edgeset_broker_auth_failures_total{reason} and
// logged; the client only sees "bad username or password" (or "not
// authorized" for a bad will topic).
var (
	errAnonymous     = &authError{"anonymous", "anonymous connection"}
	errBadPassword   = &authError{"bad_password", "wrong password"}
	errBadNodeName   = &authError{"bad_node_name", "invalid node name"}
	errRevoked       = &authError{"revoked", "node revoked"}
	errBadClientID   = &authError{"bad_client_id", "client id must equal the node name"}
	errCertMismatch  = &authError{"cert_mismatch", "username differs from certificate common name"}
	errWillForbidden = &authError{"will_forbidden", "will topic not allowed"}
)

// authError is a reason a CONNECT is refused.
type authError struct {
	reason string // label of edgeset_broker_auth_failures_total
	msg    string
}

func (e *authError) Error() string { return e.msg }

// authReason is err's metric label.
func authReason(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.reason
	}
	return "other"
}
