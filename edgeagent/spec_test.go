package edgeagent

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func ptr[T any](v T) *T { return &v }

func TestContainerName(t *testing.T) {
	long := strings.Repeat("n", 150)
	tests := []struct {
		name                     string
		node, ds, rev, container string
		want                     string
	}{
		{"plain", "gw-1", "edge/logs", "0123456789abcdef0123", "main", "es_gw-1_edge_logs_main_01234567"},
		{"dotted node", "gw.site-a", "kube-system/fluent-bit", "abcdef", "shipper", "es_gw.site-a_kube-system_fluent-bit_shipper_abcdef"},
		{"invalid chars", "gw 1/ä", "edge/logs", "abc", "main", "es_gw-1---_edge_logs_main_abc"},
		{"empty part", "gw", "/logs", "abc", "main", "es_gw_x_logs_main_abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ContainerName(tc.node, tc.ds, tc.rev, tc.container))
		})
	}
	t.Run("long names are cut and hashed", func(t *testing.T) {
		a := ContainerName(long, "edge/"+long, "abc", "x")
		b := ContainerName(long, "edge/"+long, "abc", "y")
		assert.LessOrEqual(t, len(a), maxNameLen)
		assert.NotEqual(t, a, b)
	})
}

func TestBuildSpecs(t *testing.T) {
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		HostPID:                       true,
		TerminationGracePeriodSeconds: ptr(int64(5)),
		Volumes:                       []schema.Volume{{Name: "logs", HostPath: &schema.HostPathVolumeSource{Path: "/var/log"}}},
		Containers: []schema.Container{
			{
				Name: "shipper", Image: "fluent/fluent-bit:3", Command: []string{"/fluent-bit"}, Args: []string{"-c", "/etc/fb.conf"},
				Env:             []schema.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}},
				Ports:           []schema.ContainerPort{{ContainerPort: 2020, HostPort: 2020, Protocol: "UDP"}, {ContainerPort: 9000}},
				VolumeMounts:    []schema.VolumeMount{{Name: "logs", MountPath: "/logs", ReadOnly: true}},
				Resources:       schema.ResourceRequirements{Limits: schema.ResourceList{"cpu": "250m", "memory": "64Mi"}},
				SecurityContext: &schema.SecurityContext{Privileged: ptr(true)},
			},
			{Name: "sidecar", Image: "busybox:1.36"},
		},
	}}
	specs, err := BuildSpecs("gw-1", "edge/logs", "0123456789abcdef", tmpl)
	require.NoError(t, err)
	require.Len(t, specs, 2)
	assert.Equal(t, ContainerSpec{
		Name:  "es_gw-1_edge_logs_shipper_01234567",
		Image: "fluent/fluent-bit:3",
		Labels: map[string]string{
			LabelManaged: "true", LabelNode: "gw-1", LabelDaemonSet: "edge/logs", LabelRevision: "0123456789abcdef",
			LabelContainer: "shipper", LabelIndex: "0", LabelStopGrace: "5",
			LabelPodName: PodName("gw-1", "edge/logs"), LabelPodUID: PodUID("gw-1", "edge/logs", "0123456789abcdef"),
		},
		Entrypoint: []string{"/fluent-bit"}, Cmd: []string{"-c", "/etc/fb.conf"}, Env: []string{"A=1", "B="},
		HostPID: true, Privileged: true, Hostname: PodName("gw-1", "edge/logs"),
		Ports:       []PortBinding{{ContainerPort: 2020, HostPort: 2020, Protocol: "udp"}},
		Mounts:      []Mount{{Source: "/var/log", Target: "/logs", ReadOnly: true}},
		NanoCPUs:    250_000_000,
		Memory:      64 << 20,
		StopTimeout: 5 * time.Second,
	}, specs[0])
	assert.Equal(t, "1", specs[1].Labels[LabelIndex])
	assert.Empty(t, specs[1].NetworkOf, "filled in at create time")
	assert.Equal(t, DefaultStopGrace, mustSpecs(t, schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "a", Image: "x:1"}}}})[0].StopTimeout)
	assert.True(t, SharesNetwork(tmpl))
}

func mustSpecs(t *testing.T, tmpl schema.PodTemplateSpec) []ContainerSpec {
	t.Helper()
	s, err := BuildSpecs("n", "ns/ds", "rev", tmpl)
	require.NoError(t, err)
	return s
}

func TestBuildSpecsHostNetworkDropsPortBindings(t *testing.T) {
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{HostNetwork: true, Containers: []schema.Container{
		{Name: "a", Image: "x:1", Ports: []schema.ContainerPort{{ContainerPort: 80, HostPort: 80}}},
		{Name: "b", Image: "x:1"},
	}}}
	specs := mustSpecs(t, tmpl)
	assert.True(t, specs[0].HostNetwork)
	assert.Empty(t, specs[0].Ports)
	assert.False(t, SharesNetwork(tmpl))
}

func TestBuildSpecsErrors(t *testing.T) {
	tests := []struct {
		name string
		spec schema.PodSpec
		want string
	}{
		{"no containers", schema.PodSpec{}, "spec.containers is empty"},
		{"unknown volume", schema.PodSpec{Containers: []schema.Container{{Name: "a", Image: "x", VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v"}}}}},
			`spec.containers[0] (a): volumeMounts[0]: no volume named "v"`},
		{"bad cpu", schema.PodSpec{Containers: []schema.Container{{Name: "a", Image: "x", Resources: schema.ResourceRequirements{Limits: schema.ResourceList{"cpu": "lots"}}}}},
			"resources.limits.cpu"},
		{"negative memory", schema.PodSpec{Containers: []schema.Container{{Name: "a", Image: "x", Resources: schema.ResourceRequirements{Limits: schema.ResourceList{"memory": "-1Mi"}}}}},
			"resources.limits.memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildSpecs("n", "ns/ds", "rev", schema.PodTemplateSpec{Spec: tc.spec})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLimitQuantities(t *testing.T) {
	tests := []struct {
		q         schema.Quantity
		nano, mem int64
	}{
		{"1", 1_000_000_000, 1},
		{"0.5", 500_000_000, 1},
		{"100m", 100_000_000, 1},
		{"1Gi", 1 << 30 * 1_000_000_000, 1 << 30},
		{"1e3", 1000 * 1_000_000_000, 1000},
	}
	for _, tc := range tests {
		t.Run(string(tc.q), func(t *testing.T) {
			nano, err := parseNanoCPUs(tc.q)
			require.NoError(t, err)
			assert.Equal(t, tc.nano, nano)
			mem, err := parseBytes(tc.q)
			require.NoError(t, err)
			assert.Equal(t, tc.mem, mem)
		})
	}
}

func TestPullPolicyDefaults(t *testing.T) {
	tests := []struct{ image, policy, want string }{
		{"busybox", "", schema.PullAlways},
		{"busybox:latest", "", schema.PullAlways},
		{"busybox:1.36", "", schema.PullIfNotPresent},
		{"registry:5000/busybox", "", schema.PullAlways},
		{"registry:5000/busybox:1", "", schema.PullIfNotPresent},
		{"busybox@sha256:abc", "", schema.PullIfNotPresent},
		{"busybox:1.36", schema.PullNever, schema.PullNever},
	}
	for _, tc := range tests {
		t.Run(tc.image+tc.policy, func(t *testing.T) {
			assert.Equal(t, tc.want, pullPolicy(schema.Container{Image: tc.image, ImagePullPolicy: tc.policy}))
		})
	}
}
