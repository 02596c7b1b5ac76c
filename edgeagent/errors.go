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
	// ErrRunAsRoot: runAsNonRoot is set and the image would run as root
	// (or its user cannot be verified to be non-root).
	ErrRunAsRoot = errors.New("container has runAsNonRoot and image will run as root")
)

// ConfigError is why an instance's containers cannot be built yet: a
// referenced ConfigMap, Secret or key is missing. The instance reports
// schema.PhaseCreateContainerConfigError with Message and is retried when
// the desired state or a config object changes, as in Kubernetes.
type ConfigError struct {
	// Message is Kubernetes' wording, e.g. `configmap "x" not found`.
	Message string
}

func (e *ConfigError) Error() string { return e.Message }
