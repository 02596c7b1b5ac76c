package edgeagent

import "errors"

// Errors a Runtime returns; callers test for them with errors.Is.
var (
	// ErrNotFound: the container does not exist.
	ErrNotFound = errors.New("container not found")
	// ErrNameConflict: a container with that name already exists.
	ErrNameConflict = errors.New("container name already in use")
	// ErrImageNotPresent: the image is absent and the pull policy is Never.
	ErrImageNotPresent = errors.New("image not present and pull policy is Never")
	// ErrUnavailable: the engine did not carry out the call for reasons of
	// its own (unreachable, shutting down, failing internally) rather than
	// because of the request; the same call may succeed later.
	ErrUnavailable = errors.New("container engine unavailable")
)
