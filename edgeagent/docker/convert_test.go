package docker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/events"

	"github.com/edgeset/edgeset/edgeagent"
)

func TestCreateOptionsErrors(t *testing.T) {
	cases := []struct {
		name string
		spec edgeagent.ContainerSpec
		want string
	}{
		{"host network and NetworkOf", edgeagent.ContainerSpec{HostNetwork: true, NetworkOf: "x"}, "exclusive"},
		{"ports with NetworkOf", edgeagent.ContainerSpec{NetworkOf: "x", Ports: []edgeagent.PortBinding{{ContainerPort: 80}}}, "publish them on x"},
		{"container port zero", edgeagent.ContainerSpec{Ports: []edgeagent.PortBinding{{}}}, "ports[0]: container port 0"},
		{"container port too big", edgeagent.ContainerSpec{Ports: []edgeagent.PortBinding{{ContainerPort: 70000}}}, "ports[0]: container port 70000"},
		{"host port negative", edgeagent.ContainerSpec{Ports: []edgeagent.PortBinding{{ContainerPort: 80}, {ContainerPort: 81, HostPort: -1}}}, "ports[1]: host port -1"},
		{"bad host IP", edgeagent.ContainerSpec{Ports: []edgeagent.PortBinding{{ContainerPort: 80, HostIP: "localhost"}}}, "ports[0]: host IP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := createOptions(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("createOptions: %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestCreateOptionsMapping(t *testing.T) {
	labels := map[string]string{"a": "b"}
	spec := edgeagent.ContainerSpec{
		Name:        "c",
		Image:       "img",
		Labels:      labels,
		HostNetwork: true,
		Ports:       []edgeagent.PortBinding{{ContainerPort: 80, HostPort: 8080}},
		Mounts:      []edgeagent.Mount{{Source: "/s", Target: "/t", ReadOnly: true}},
		StopTimeout: 1500 * time.Millisecond,
	}
	opts, err := createOptions(spec)
	if err != nil {
		t.Fatalf("createOptions: %v", err)
	}
	cfg, host := opts.Config, opts.HostConfig
	if _, ok := labels[edgeagent.LabelManaged]; ok {
		t.Error("createOptions modified the spec's labels")
	}
	if cfg.Labels[edgeagent.LabelManaged] != "true" || cfg.Labels["a"] != "b" {
		t.Errorf("labels = %v, want the spec's plus managed", cfg.Labels)
	}
	if host.NetworkMode != "host" || len(host.PortBindings) != 0 || len(cfg.ExposedPorts) != 0 {
		t.Errorf("host network: mode %q, bindings %v, exposed %v; want host and no ports", host.NetworkMode, host.PortBindings, cfg.ExposedPorts)
	}
	if cfg.StopTimeout == nil || *cfg.StopTimeout != 2 {
		t.Errorf("StopTimeout = %v, want 2 (rounded up)", cfg.StopTimeout)
	}
	if len(host.Mounts) != 1 || host.Mounts[0].Type != "bind" || !host.Mounts[0].ReadOnly || host.Mounts[0].Source != "/s" {
		t.Errorf("mounts = %+v, want one read-only bind of /s", host.Mounts)
	}
	if host.RestartPolicy.Name != "no" || opts.Name != "c" || cfg.Image != "img" {
		t.Errorf("restart %q, name %q, image %q", host.RestartPolicy.Name, opts.Name, cfg.Image)
	}
}

func TestGraceSeconds(t *testing.T) {
	cases := []struct {
		in   time.Duration
		want int
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Millisecond, 1},
		{time.Second, 1},
		{30 * time.Second, 30},
		{30*time.Second + 1, 31},
	}
	for _, tc := range cases {
		if got := graceSeconds(tc.in); got != tc.want {
			t.Errorf("graceSeconds(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestRuntimeEvent(t *testing.T) {
	cases := []struct {
		name string
		msg  events.Message
		want edgeagent.RuntimeEvent
	}{
		{
			name: "die",
			msg: events.Message{Action: "die", TimeNano: 1_500_000_000, Actor: events.Actor{ID: "c1", Attributes: map[string]string{
				"exitCode": "3", "image": "img", "name": "n", edgeagent.LabelNode: "node",
			}}},
			want: edgeagent.RuntimeEvent{ContainerID: "c1", Action: "die", ExitCode: 3,
				Labels: map[string]string{edgeagent.LabelNode: "node"}, Time: time.Unix(1, 500_000_000)},
		},
		{
			name: "health",
			msg:  events.Message{Action: "health_status: unhealthy", Time: 2, Actor: events.Actor{ID: "c2"}},
			want: edgeagent.RuntimeEvent{ContainerID: "c2", Action: "health_status", Time: time.Unix(2, 0)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runtimeEvent(tc.msg)
			if got.ContainerID != tc.want.ContainerID || got.Action != tc.want.Action || got.ExitCode != tc.want.ExitCode ||
				!got.Time.Equal(tc.want.Time) || len(got.Labels) != len(tc.want.Labels) ||
				got.Labels[edgeagent.LabelNode] != tc.want.Labels[edgeagent.LabelNode] {
				t.Errorf("runtimeEvent = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCappedBuffer(t *testing.T) {
	b := &cappedBuffer{max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if string(b.buf) != "abcde" {
		t.Errorf("buffer = %q, want %q", b.buf, "abcde")
	}
}

func TestParseTime(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"", time.Time{}, false},
		{"0001-01-01T00:00:00Z", time.Time{}, false},
		{"2024-05-01T10:00:00.123456789Z", time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC), false},
		{"yesterday", time.Time{}, true},
	}
	for _, tc := range cases {
		got, err := parseTime("StartedAt", tc.in)
		if (err != nil) != tc.wantErr || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// BenchmarkCreateOptions measures the adapter's own work in Create: mapping
// a ContainerSpec onto the engine's configuration (no I/O).
func BenchmarkCreateOptions(b *testing.B) {
	spec := edgeagent.ContainerSpec{
		Name:        "bench",
		Image:       "img",
		Labels:      map[string]string{edgeagent.LabelNode: "n", edgeagent.LabelDaemonSet: "ns/ds"},
		Cmd:         []string{"sleep"},
		Env:         []string{"A=1"},
		Ports:       []edgeagent.PortBinding{{ContainerPort: 8080, HostPort: 8080}},
		Mounts:      []edgeagent.Mount{{Source: "/var/log", Target: "/logs", ReadOnly: true}},
		NanoCPUs:    5e8,
		Memory:      64 << 20,
		StopTimeout: 30 * time.Second,
	}
	for b.Loop() {
		if _, err := createOptions(spec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCreateOptionsHostname: the pod name is the host name of a container
// with a network namespace of its own; the engine forbids one beside host
// networking or a joined namespace, whose owner's name is shared.
func TestCreateOptionsHostname(t *testing.T) {
	cases := []struct {
		name string
		spec edgeagent.ContainerSpec
		want string
	}{
		{"own namespace", edgeagent.ContainerSpec{Hostname: "fluent-bit-x7k2q"}, "fluent-bit-x7k2q"},
		{"host network", edgeagent.ContainerSpec{Hostname: "fluent-bit-x7k2q", HostNetwork: true}, ""},
		{"joins another", edgeagent.ContainerSpec{Hostname: "fluent-bit-x7k2q", NetworkOf: "abc"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Name, tc.spec.Image = "c", "img"
			opts, err := createOptions(tc.spec)
			if err != nil {
				t.Fatalf("createOptions: %v", err)
			}
			if opts.Config.Hostname != tc.want {
				t.Errorf("Hostname = %q, want %q", opts.Config.Hostname, tc.want)
			}
		})
	}
}

// TestStartRefusalIsNotUnavailability: the daemon answers 500 both while it
// shuts down and when the OCI runtime refuses a container; only the first
// is the engine being unavailable (retried at once), the second fails the
// same way again and goes under the crash back-off.
func TestStartRefusalIsNotUnavailability(t *testing.T) {
	oci := fmt.Errorf("%w: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: unable to apply caps: operation not permitted: unknown", cerrdefs.ErrInternal)
	shutdown := fmt.Errorf("%w: daemon is shutting down", cerrdefs.ErrInternal)
	propagation := fmt.Errorf("%w: path / is mounted on / but it is not a shared or slave mount", cerrdefs.ErrInternal)
	for _, refusal := range []error{oci, propagation} {
		if err := containerErr("start", "abc", refusal); errors.Is(err, edgeagent.ErrUnavailable) {
			t.Errorf("refusal %q is ErrUnavailable", err)
		}
	}
	if err := containerErr("start", "abc", shutdown); !errors.Is(err, edgeagent.ErrUnavailable) {
		t.Errorf("daemon failure %q is not ErrUnavailable", err)
	}
}
