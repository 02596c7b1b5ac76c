package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

// Create creates (but does not start) a container from spec. The container
// is always labelled edgeagent.LabelManaged=true, never restarted by the
// engine (the agent restarts it); a name in use is
// edgeagent.ErrNameConflict, a failure of the engine's own
// edgeagent.ErrUnavailable.
func (r *Runtime) Create(ctx context.Context, spec edgeagent.ContainerSpec) (string, error) {
	opts, err := createOptions(spec)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	if spec.RunAsNonRoot {
		if err := r.verifyNonRoot(ctx, spec); err != nil {
			return "", fmt.Errorf("create container %s: %w", spec.Name, err)
		}
	}
	res, err := r.cli.ContainerCreate(ctx, opts)
	switch {
	case cerrdefs.IsConflict(err):
		return "", fmt.Errorf("create container %s: %w: %w", spec.Name, edgeagent.ErrNameConflict, err)
	case unavailable(err):
		return "", fmt.Errorf("create container %s: %w: %w", spec.Name, edgeagent.ErrUnavailable, err)
	case err != nil:
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	return res.ID, nil
}

// createOptions maps spec onto the engine's container and host config.
func createOptions(spec edgeagent.ContainerSpec) (client.ContainerCreateOptions, error) {
	if spec.NetworkOf != "" && spec.HostNetwork {
		return client.ContainerCreateOptions{}, errors.New("hostNetwork and NetworkOf are exclusive")
	}
	if spec.NetworkOf != "" && len(spec.Ports) > 0 {
		return client.ContainerCreateOptions{}, fmt.Errorf("ports cannot be published by a container joining %s's network namespace; publish them on %s", spec.NetworkOf, spec.NetworkOf)
	}
	exposed, bindings, err := portMaps(spec)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	mounts, err := bindMounts(spec.Mounts)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	cfg := &container.Config{
		Image:        spec.Image,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Env:          spec.Env,
		Labels:       managedLabels(spec.Labels),
		ExposedPorts: exposed,
		StopTimeout:  stopTimeout(spec.StopTimeout),
		WorkingDir:   spec.WorkingDir,
		User:         spec.User,
	}
	if !spec.HostNetwork && spec.NetworkOf == "" {
		// The engine refuses a host name beside either; a container joining
		// another's namespace gets that container's host name.
		cfg.Hostname = spec.Hostname
	}
	host := &container.HostConfig{
		NetworkMode:   networkMode(spec),
		PortBindings:  bindings,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Privileged:    spec.Privileged,
		Mounts:        mounts,
		Resources:     container.Resources{NanoCPUs: spec.NanoCPUs, Memory: spec.Memory},
	}
	if spec.HostPID {
		host.PidMode = "host"
	}
	if err := applySecurity(host, spec); err != nil {
		return client.ContainerCreateOptions{}, err
	}
	return client.ContainerCreateOptions{Name: spec.Name, Config: cfg, HostConfig: host}, nil
}

// managedLabels returns a copy of labels with LabelManaged=true.
func managedLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[edgeagent.LabelManaged] = "true"
	return out
}

// networkMode is "host", "container:<id>" or the engine default.
func networkMode(spec edgeagent.ContainerSpec) container.NetworkMode {
	switch {
	case spec.HostNetwork:
		return "host"
	case spec.NetworkOf != "":
		return container.NetworkMode("container:" + spec.NetworkOf)
	}
	return ""
}

// stopTimeout converts a grace period to whole seconds, rounding up; zero
// keeps the engine default (10 s).
func stopTimeout(d time.Duration) *int {
	if d <= 0 {
		return nil
	}
	s := graceSeconds(d)
	return &s
}

// graceSeconds rounds d up to whole seconds, never below zero.
func graceSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// portMaps builds the exposed-port set and the host bindings. With host
// networking nothing is published: the ports are the host's already.
func portMaps(spec edgeagent.ContainerSpec) (network.PortSet, network.PortMap, error) {
	if len(spec.Ports) == 0 || spec.HostNetwork {
		return nil, nil, nil
	}
	exposed := make(network.PortSet, len(spec.Ports))
	bindings := make(network.PortMap, len(spec.Ports))
	for i, p := range spec.Ports {
		port, binding, err := portBinding(p)
		if err != nil {
			return nil, nil, fmt.Errorf("ports[%d]: %w", i, err)
		}
		exposed[port] = struct{}{}
		bindings[port] = append(bindings[port], binding)
	}
	return exposed, bindings, nil
}

// portBinding converts one PortBinding; the protocol defaults to tcp and a
// zero host port lets the engine choose one.
func portBinding(p edgeagent.PortBinding) (network.Port, network.PortBinding, error) {
	proto := strings.ToLower(p.Protocol)
	if proto == "" {
		proto = "tcp"
	}
	if p.ContainerPort <= 0 || p.ContainerPort > math.MaxUint16 {
		return network.Port{}, network.PortBinding{}, fmt.Errorf("container port %d out of range", p.ContainerPort)
	}
	if p.HostPort < 0 || p.HostPort > math.MaxUint16 {
		return network.Port{}, network.PortBinding{}, fmt.Errorf("host port %d out of range", p.HostPort)
	}
	port, ok := network.PortFrom(uint16(p.ContainerPort), network.IPProtocol(proto))
	if !ok {
		return network.Port{}, network.PortBinding{}, fmt.Errorf("protocol %q", p.Protocol)
	}
	var binding network.PortBinding
	if p.HostPort != 0 {
		binding.HostPort = fmt.Sprint(p.HostPort)
	}
	if p.HostIP != "" {
		ip, err := netip.ParseAddr(p.HostIP)
		if err != nil {
			return network.Port{}, network.PortBinding{}, fmt.Errorf("host IP: %w", err)
		}
		binding.HostIP = ip
	}
	return port, binding, nil
}

// bindMounts converts host-path mounts; the source must exist. A
// propagation other than "" (the engine's rprivate), "rslave" or "rshared"
// is an error naming the mount.
func bindMounts(mounts []edgeagent.Mount) ([]mount.Mount, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	out := make([]mount.Mount, len(mounts))
	for i, m := range mounts {
		out[i] = mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
		switch p := mount.Propagation(m.Propagation); p {
		case "":
		case mount.PropagationRSlave, mount.PropagationRShared:
			out[i].BindOptions = &mount.BindOptions{Propagation: p}
		default:
			return nil, fmt.Errorf("mounts[%d] (%s): propagation %q is not rslave or rshared", i, m.Target, m.Propagation)
		}
	}
	return out, nil
}

// Start starts a created or exited container.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return containerErr("start", id, err)
	}
	return nil
}

// Stop sends SIGTERM (or the image's stop signal) and SIGKILL after grace,
// rounded up to whole seconds. It returns once the container has stopped,
// so ctx must allow for grace; a stopped container is not an error.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	timeout := graceSeconds(grace)
	if _, err := r.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		return containerErr("stop", id, err)
	}
	return nil
}

// Remove force-removes a container (killing it if running) with its
// anonymous volumes; a missing container is not an error.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	_, err := r.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// Inspect returns one container's state; edgeagent.ErrNotFound if it is
// gone.
func (r *Runtime) Inspect(ctx context.Context, id string) (edgeagent.ContainerState, error) {
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return edgeagent.ContainerState{}, containerErr("inspect", id, err)
	}
	st, err := containerState(res.Container)
	if err != nil {
		return edgeagent.ContainerState{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	return st, nil
}

// List returns every managed container of node, running or not, in the
// engine's order (newest first). It inspects each one for the state the
// list omits; a container removed in between is left out.
func (r *Runtime) List(ctx context.Context, node string) ([]edgeagent.ContainerState, error) {
	filters := make(client.Filters).Add("label",
		edgeagent.LabelManaged+"=true",
		edgeagent.LabelNode+"="+node)
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, fmt.Errorf("list containers of node %s: %w", node, err)
	}
	states := make([]edgeagent.ContainerState, 0, len(res.Items))
	for _, c := range res.Items {
		st, err := r.Inspect(ctx, c.ID)
		if errors.Is(err, edgeagent.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list containers of node %s: %w", node, err)
		}
		states = append(states, st)
	}
	return states, nil
}

// containerState converts the engine's inspect response.
func containerState(c container.InspectResponse) (edgeagent.ContainerState, error) {
	st := edgeagent.ContainerState{
		ID:        c.ID,
		Name:      strings.TrimPrefix(c.Name, "/"),
		IPAddress: ipAddress(c),
		LogPath:   c.LogPath,
	}
	if c.Config != nil {
		st.Image = c.Config.Image
		st.Labels = c.Config.Labels
	}
	var err error
	if st.Created, err = parseTime("Created", c.Created); err != nil {
		return st, err
	}
	if c.State == nil {
		return st, nil
	}
	st.Running = c.State.Running
	st.ExitCode = c.State.ExitCode
	st.OOMKilled = c.State.OOMKilled
	if st.StartedAt, err = parseTime("StartedAt", c.State.StartedAt); err != nil {
		return st, err
	}
	if st.FinishedAt, err = parseTime("FinishedAt", c.State.FinishedAt); err != nil {
		return st, err
	}
	return st, nil
}

// parseTime parses an engine timestamp; empty and the engine's "never"
// (0001-01-01T00:00:00Z) are the zero time.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", field, err)
	}
	if t.IsZero() {
		return time.Time{}, nil
	}
	return t, nil
}

// ipAddress is the container's address on its network: the network named by
// its network mode, else the first (by name) with an address. It is empty
// with host networking and for a container joining another's namespace
// (whose owner has the address).
func ipAddress(c container.InspectResponse) string {
	if c.NetworkSettings == nil || len(c.NetworkSettings.Networks) == 0 {
		return ""
	}
	nets := c.NetworkSettings.Networks
	if c.HostConfig != nil {
		if ep := nets[string(c.HostConfig.NetworkMode)]; ep != nil && ep.IPAddress.IsValid() {
			return ep.IPAddress.String()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(nets)) {
		if ep := nets[name]; ep != nil && ep.IPAddress.IsValid() {
			return ep.IPAddress.String()
		}
	}
	return ""
}
