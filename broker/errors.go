package broker

import "errors"

// Errors returned by this package; match them with errors.Is.
var (
	// ErrSecretPermissions: the fleet secret file is accessible to group or
	// others; the broker refuses to use a secret that may have leaked.
	ErrSecretPermissions = errors.New("fleet secret file is readable by others")
	// ErrSecretInvalid: the fleet secret file does not hold a valid secret.
	ErrSecretInvalid = errors.New("invalid fleet secret")
	// ErrInvalidRevocation: a revocation entry is neither a node name nor a
	// token fingerprint.
	ErrInvalidRevocation = errors.New("revocation entry is neither a node name nor a token fingerprint")
	// ErrNoDataDir: Options.DataDir is empty.
	ErrNoDataDir = errors.New("data dir is required")
	// ErrTLSIncomplete: a TLS option is set without the others it needs.
	ErrTLSIncomplete = errors.New("incomplete TLS options")
	// ErrRunning: Run was called on a broker that is already running.
	ErrRunning = errors.New("broker already running")
	// ErrClosed: Run was called on a closed broker.
	ErrClosed = errors.New("broker closed")
)

// Reasons a connection is refused. They are counted in Stats.AuthFailures and
// logged; the client only sees "bad username or password" (or "not
// authorized" for a bad will topic).
var (
	errAnonymous     = errors.New("anonymous connection")
	errBadPassword   = errors.New("wrong password")
	errBadNodeName   = errors.New("invalid node name")
	errRevoked       = errors.New("node revoked")
	errBadClientID   = errors.New("client id must equal the node name")
	errCertMismatch  = errors.New("username differs from certificate common name")
	errWillForbidden = errors.New("will topic not allowed")
)
