package edgeagent

import (
	"context"
	"io"
	"time"
)

// Labels that mark a container as edgeset's. Containers without
// LabelManaged=true are never touched.
const (
	LabelManaged   = "io.edgeset.managed"   // "true"
	LabelNode      = "io.edgeset.node"      // node name (agents sharing an engine in tests)
	LabelDaemonSet = "io.edgeset.daemonset" // "namespace/name"
	LabelRevision  = "io.edgeset.revision"  // template hash
	LabelContainer = "io.edgeset.container" // container name in the template
	LabelIndex     = "io.edgeset.index"     // container position in the template, "0" owns the network namespace
	LabelPodName   = "io.edgeset.pod-name"  // the instance's stable pod-like name (metadata.name)
	LabelPodUID    = "io.edgeset.pod-uid"   // the instance's uid (metadata.uid)
	// LabelInitIndex marks an init container (sidecars included) with its
	// position among the template's initContainers; init containers carry
	// no LabelIndex.
	LabelInitIndex = "io.edgeset.init-index"
)

// Runtime is the container engine as the agent needs it. The Docker
// implementation lives in edgeagent/docker, an in-memory fake in
// edgeagent/fake. Implementations are safe for concurrent use. A call the
// engine could not carry out for reasons of its own (an engine restarting,
// say) fails with ErrUnavailable: the agent retries it rather than report
// the instance Failed.
type Runtime interface {
	// Info describes the engine; an error means it is unreachable.
	Info(ctx context.Context) (RuntimeInfo, error)
	// List returns every container labelled LabelManaged=true (running or
	// not) whose LabelNode equals node.
	List(ctx context.Context, node string) ([]ContainerState, error)
	// PullImage makes image present according to policy (schema.PullAlways,
	// PullIfNotPresent, PullNever), draining the engine's progress. A missing
	// image under PullNever is ErrImageNotPresent.
	PullImage(ctx context.Context, image, policy string, auth *RegistryAuth) error
	// Create creates (but does not start) a container. A name already in use
	// is ErrNameConflict.
	Create(ctx context.Context, spec ContainerSpec) (id string, err error)
	// Start starts a created or exited container.
	Start(ctx context.Context, id string) error
	// Stop sends SIGTERM, then SIGKILL after grace.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove force-removes a container; a missing container is not an error.
	Remove(ctx context.Context, id string) error
	// Inspect returns one container's state; ErrNotFound if it is gone.
	Inspect(ctx context.Context, id string) (ContainerState, error)
	// Exec runs cmd in a running container and returns its exit code and
	// combined output (truncated to a few KiB).
	Exec(ctx context.Context, id string, cmd []string) (exitCode int, output []byte, err error)
	// Events streams lifecycle events of managed containers until ctx ends
	// or the stream fails; the caller re-subscribes after an error.
	Events(ctx context.Context) (<-chan RuntimeEvent, <-chan error)
	// Logs returns the container's log stream (stdout and stderr merged).
	Logs(ctx context.Context, id string, opts LogOptions) (io.ReadCloser, error)
	// ReadFile returns up to limit bytes of the file at path inside a
	// container, running or not (termination messages); a missing file is
	// ErrNotFound.
	ReadFile(ctx context.Context, id, path string, limit int64) ([]byte, error)
}

// LogOptions selects part of a container's log.
type LogOptions struct {
	// Tail is the number of last lines; zero or less is all.
	Tail int
	// Follow streams new lines until ctx ends.
	Follow bool
	// Until, when set, ends the log at that instant (the previous run of a
	// restarted container ends where the current one started).
	Until time.Time
	// Since, when set, starts the log at that instant; with Tail, the last
	// lines are taken first and those before Since dropped, as Docker does.
	// A container restarted in place keeps one log for all its runs.
	Since time.Time
}

// RuntimeInfo describes the container engine.
type RuntimeInfo struct {
	Name    string // "docker", "fake"
	Version string
}

// RegistryAuth holds registry credentials from the agent config.
type RegistryAuth struct {
	Username string
	Password string
	Server   string
}

// ContainerSpec is everything needed to create one container of an instance.
type ContainerSpec struct {
	Name        string
	Image       string
	Labels      map[string]string
	Entrypoint  []string // template command; nil keeps the image's
	Cmd         []string // template args; nil keeps the image's
	Env         []string // KEY=VALUE
	HostNetwork bool
	HostPID     bool
	Privileged  bool
	// NetworkOf is the id of the container whose network namespace this one
	// joins (the instance's first container when hostNetwork is off).
	NetworkOf string
	Ports     []PortBinding
	Mounts    []Mount
	NanoCPUs  int64 // CPU limit in 1e-9 CPUs; 0 is unlimited
	Memory    int64 // memory limit in bytes; 0 is unlimited
	// StopTimeout is the template's terminationGracePeriodSeconds.
	StopTimeout time.Duration
	// PullAuth is the credential for this image chosen from the template's
	// imagePullSecrets; nil uses the device's own (Config.RegistryAuth).
	PullAuth *RegistryAuth

	// Hostname is the container's host name: the instance's pod name, as
	// Kubernetes names a pod's host, unless it uses the host's network. A
	// container joining another's network namespace takes that one's.
	Hostname string
	// WorkingDir overrides the image's working directory when set.
	WorkingDir string
	// User is "uid" or "uid:gid" (runAsUser, runAsGroup); empty keeps the
	// image's user.
	User string
	// RunAsNonRoot makes Create refuse (ErrRunAsRoot) an image that would
	// run as uid 0, or whose user is not numeric, when User sets no uid.
	RunAsNonRoot bool
	// GroupAdd are supplementary groups (fsGroup, supplementalGroups).
	GroupAdd []string
	// CapAdd and CapDrop are Linux capabilities without the CAP_ prefix,
	// or ALL.
	CapAdd  []string
	CapDrop []string
	// ReadOnlyRootfs mounts the container's root filesystem read-only.
	ReadOnlyRootfs bool
	// NoNewPrivileges is allowPrivilegeEscalation: false.
	NoNewPrivileges bool
	// Seccomp is "" (the engine's default profile), "unconfined", or the
	// host path of a profile file (Localhost).
	Seccomp string
	// UnmaskedProc is procMount: Unmasked.
	UnmaskedProc bool
	// Sysctls are namespaced kernel parameters.
	Sysctls map[string]string
}

// PortBinding publishes a container port on the host.
type PortBinding struct {
	ContainerPort int
	HostPort      int
	HostIP        string
	Protocol      string // "tcp" or "udp"
}

// Mount bind-mounts a host path.
type Mount struct {
	Source   string
	Target   string
	ReadOnly bool
	// Propagation is "" (private), "rslave" (HostToContainer) or "rshared"
	// (Bidirectional).
	Propagation string
}

// ContainerState is one container as the engine reports it.
type ContainerState struct {
	ID         string
	Name       string
	Image      string
	Labels     map[string]string
	Running    bool
	ExitCode   int
	Created    time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// IPAddress is the container's address on its network, empty with host
	// networking (probes then use 127.0.0.1).
	IPAddress string
	// OOMKilled reports that the last run ended by the kernel's OOM killer.
	OOMKilled bool
	// LogPath is the engine's log file of the container, if it keeps one
	// (Docker's json-file driver).
	LogPath string
}

// RuntimeEvent is a lifecycle event of a managed container.
type RuntimeEvent struct {
	ContainerID string
	Action      string // "start", "die", "destroy", "oom", "health_status"
	ExitCode    int
	Labels      map[string]string
	Time        time.Time
}
