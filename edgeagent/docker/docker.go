// Package docker implements edgeagent.Runtime on a Docker engine through the
// Engine API client github.com/moby/moby/client.
//
// The client negotiates the API version with the engine on connection: it
// speaks API 1.40 (Docker 19.03) up to 1.56, so the oldest engine edgeset
// supports is Docker 19.03. Options.APIVersion pins a version instead.
//
// The Runtime only ever lists containers labelled edgeagent.LabelManaged=true
// and only subscribes to their events. Containers are addressed by the ids
// those calls (or Create) return; the caller is trusted not to pass the id of
// a container edgeset does not own.
package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

// connectTimeout bounds the ping New sends to the engine.
const connectTimeout = 10 * time.Second

// Options configure the connection to the Docker engine. The zero value
// connects like the docker CLI: DOCKER_HOST (with DOCKER_TLS_VERIFY and
// DOCKER_CERT_PATH) if set, else the local socket, negotiating the API
// version unless DOCKER_API_VERSION pins one.
type Options struct {
	// Host is the engine address, e.g. "unix:///var/run/docker.sock" or
	// "tcp://10.0.0.2:2376"; it overrides DOCKER_HOST.
	Host string
	// APIVersion pins the Engine API version ("1.41"), overriding
	// DOCKER_API_VERSION and disabling negotiation. It must be at least
	// client.MinAPIVersion.
	APIVersion string
}

// Runtime is edgeagent.Runtime on a Docker engine. It is safe for
// concurrent use; Close releases its connections.
type Runtime struct {
	cli *client.Client
}

var (
	_ edgeagent.Runtime        = (*Runtime)(nil)
	_ edgeagent.ProgressPuller = (*Runtime)(nil)
	_ edgeagent.ImageInspector = (*Runtime)(nil)
)

// New connects to the engine described by opts and negotiates the API
// version. It fails if the engine does not answer or speaks only an API
// older than client.MinAPIVersion.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	cli, err := client.New(clientOpts(opts)...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", opts.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("connect to docker engine at %s: %w", cli.DaemonHost(), err)
	}
	return &Runtime{cli: cli}, nil
}

// clientOpts translates opts into client options: the environment, with
// explicit options taking precedence.
func clientOpts(opts Options) []client.Opt {
	o := []client.Opt{client.WithTLSClientConfigFromEnv(), client.WithHostFromEnv()}
	if opts.Host != "" {
		o = append(o, client.WithHost(opts.Host))
	}
	if opts.APIVersion != "" {
		o = append(o, client.WithAPIVersion(opts.APIVersion))
	} else {
		o = append(o, client.WithAPIVersionFromEnv())
	}
	return o
}

// Close releases the client's idle connections. It is safe to call twice.
func (r *Runtime) Close() error {
	return r.cli.Close()
}

// APIVersion returns the Engine API version in use (after negotiation).
func (r *Runtime) APIVersion() string {
	return r.cli.ClientVersion()
}

// Host returns the engine address the runtime talks to.
func (r *Runtime) Host() string {
	return r.cli.DaemonHost()
}

// Info returns the engine's version; an error means it is unreachable.
func (r *Runtime) Info(ctx context.Context) (edgeagent.RuntimeInfo, error) {
	v, err := r.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return edgeagent.RuntimeInfo{}, fmt.Errorf("docker engine version at %s: %w", r.cli.DaemonHost(), err)
	}
	return edgeagent.RuntimeInfo{Name: "docker", Version: v.Version}, nil
}

// containerErr wraps err from an operation on a container, mapping the
// engine's "no such container" to edgeagent.ErrNotFound and its failures to
// edgeagent.ErrUnavailable.
func containerErr(op, id string, err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s container %s: %w: %w", op, id, edgeagent.ErrNotFound, err)
	case unavailable(err):
		return fmt.Errorf("%s container %s: %w: %w", op, id, edgeagent.ErrUnavailable, err)
	}
	return fmt.Errorf("%s container %s: %w", op, id, err)
}

// unavailable reports whether err is the engine's failure rather than a
// refusal of the request: no connection, or a server error (HTTP 5xx), which
// is what a daemon answers while it shuts down. The OCI runtime's refusal
// to set up a container (capabilities the engine may not grant, a device
// or sysctl it cannot provide) also comes as a server error, but is about
// the container: the same start fails again.
func unavailable(err error) bool {
	if err == nil || containerRefusal(err) {
		return false
	}
	return client.IsErrConnectionFailed(err) || cerrdefs.IsInternal(err) || cerrdefs.IsUnavailable(err)
}

// refusals are what the daemon says, with a server error, when it cannot
// set up this container: the OCI runtime (runc, crun) refusing its process
// ("failed to create shim task: OCI runtime create failed: ..."), and a
// mountPropagation the host's mounts cannot give ("path / is mounted on /
// but it is not a shared or slave mount").
var refusals = []string{"OCI runtime", "is not a shared mount", "is not a shared or slave mount"}

// containerRefusal reports whether err is one of refusals.
func containerRefusal(err error) bool {
	msg := err.Error()
	for _, r := range refusals {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}
