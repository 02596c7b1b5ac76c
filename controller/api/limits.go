package api

import "time"

// Limits bound what one client can hold of the server. A zero field means
// no limit, as in net/http; the controller's configuration supplies the
// defaults (docs/security.md).
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers, ReadTimeout
	// reading the whole request, body included.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds writing a response; a streamed response (logs)
	// gets it afresh for every chunk instead.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block.
	MaxHeaderBytes int
	// MaxUnauthenticatedConns bounds the open connections that have not yet
	// carried an authorised request; MaxConnsPerSource the open
	// connections of one source, authenticated or not. A connection over
	// either cap is closed as soon as it is accepted.
	MaxUnauthenticatedConns int
	MaxConnsPerSource       int
	// AuthFailures failed authentications of one source within
	// AuthFailureWindow block the source until AuthFailureWindow has passed
	// since the last of them: each of its requests that needs a token is
	// then answered 429 with Retry-After, whatever token it carries.
	AuthFailures      int
	AuthFailureWindow time.Duration
	// AuthLogInterval allows one log line per source and interval about its
	// failed authentications, and one line per interval about refused
	// connections; the next line counts those suppressed.
	AuthLogInterval time.Duration
}
