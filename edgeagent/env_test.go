package edgeagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func testContext() InstanceContext {
	return InstanceContext{
		Node: "gw-1", NodeLabels: map[string]string{"site": "berlin"}, HostIPs: []string{"10.0.0.5", "fd00::5"},
		Allocatable: schema.ResourceList{"cpu": "4", "memory": "8Gi"},
		DaemonSet:   "edge/logs", Revision: "0123456789abcdef0123",
		ConfigMaps: map[string]schema.ConfigMap{
			"cfg": {Metadata: schema.ObjectMeta{Name: "cfg", Namespace: "edge"}, Data: map[string]string{"LEVEL": "debug", "url": "http://x", "1bad": "skipped", "fluent.conf": "[INPUT]"}},
		},
		Secrets: map[string]schema.Secret{
			"api": {Metadata: schema.ObjectMeta{Name: "api", Namespace: "edge"}, Data: map[string][]byte{"key": []byte("s3cr3t")}},
		},
	}
}

func envOf(t *testing.T, ic InstanceContext, tmpl schema.PodTemplateSpec) ([]string, error) {
	t.Helper()
	f := newPodFields(ic, tmpl)
	env, _, err := envResolver{ic: ic, fields: f, spec: tmpl.Spec}.resolve("spec.containers[0]", tmpl.Spec.Containers[0])
	return env, err
}

func fieldEnv(path string) schema.EnvVar {
	return schema.EnvVar{Name: "V", ValueFrom: &schema.EnvVarSource{FieldRef: &schema.ObjectFieldSelector{FieldPath: path}}}
}

func TestResolveEnv(t *testing.T) {
	yes := ptr(true)
	tests := []struct {
		name    string
		env     []schema.EnvVar
		envFrom []schema.EnvFromSource
		want    []string
	}{
		{"literal and empty", []schema.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}}, nil, []string{"A=1", "B="}},
		{"expansion of earlier variables only", []schema.EnvVar{{Name: "A", Value: "$(B)x"}, {Name: "B", Value: "b"}, {Name: "C", Value: "$(B)-$(A)-$$(B)"}}, nil,
			[]string{"A=$(B)x", "B=b", "C=b-$(B)x-$(B)"}},
		{"configMapKeyRef and secretKeyRef", []schema.EnvVar{
			{Name: "L", ValueFrom: &schema.EnvVarSource{ConfigMapKeyRef: &schema.ConfigMapKeySelector{Name: "cfg", Key: "LEVEL"}}},
			{Name: "K", ValueFrom: &schema.EnvVarSource{SecretKeyRef: &schema.SecretKeySelector{Name: "api", Key: "key"}}},
		}, nil, []string{"L=debug", "K=s3cr3t"}},
		{"optional missing sources leave the variable undefined", []schema.EnvVar{
			{Name: "X", ValueFrom: &schema.EnvVarSource{ConfigMapKeyRef: &schema.ConfigMapKeySelector{Name: "nope", Key: "k", Optional: yes}}},
			{Name: "Y", ValueFrom: &schema.EnvVarSource{ConfigMapKeyRef: &schema.ConfigMapKeySelector{Name: "cfg", Key: "nope", Optional: yes}}},
			{Name: "Z", ValueFrom: &schema.EnvVarSource{SecretKeyRef: &schema.SecretKeySelector{Name: "nope", Key: "k", Optional: yes}}},
			{Name: "W", Value: "$(X)"},
		}, []schema.EnvFromSource{{ConfigMapRef: &schema.ConfigMapEnvSource{Name: "nope", Optional: yes}}}, []string{"W=$(X)"}},
		{"envFrom with prefix skips invalid names, env overrides it", []schema.EnvVar{{Name: "CFG_LEVEL", Value: "info"}, {Name: "U", Value: "$(CFG_url)"}},
			[]schema.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &schema.ConfigMapEnvSource{Name: "cfg"}}, {SecretRef: &schema.SecretEnvSource{Name: "api"}}},
			[]string{"CFG_1bad=skipped", "CFG_LEVEL=info", "CFG_fluent.conf=[INPUT]", "CFG_url=http://x", "key=s3cr3t", "U=http://x"}},
		{"envFrom without prefix skips a key starting with a digit", nil,
			[]schema.EnvFromSource{{ConfigMapRef: &schema.ConfigMapEnvSource{Name: "cfg"}}},
			[]string{"LEVEL=debug", "fluent.conf=[INPUT]", "url=http://x"}},
		{"fieldRef feeds expansion", []schema.EnvVar{fieldEnv("spec.nodeName"), {Name: "ARG", Value: "--node=$(V)"}}, nil, []string{"V=gw-1", "ARG=--node=gw-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: tc.env, EnvFrom: tc.envFrom}}}}
			got, err := envOf(t, testContext(), tmpl)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFieldRefPaths(t *testing.T) {
	ic := testContext()
	meta := schema.ObjectMeta{Labels: map[string]string{"app": "logs", "tier": "node"}, Annotations: map[string]string{"note": `say "hi"`}}
	tests := []struct {
		path        string
		hostNetwork bool
		want        string
	}{
		{"metadata.name", false, PodName("gw-1", "edge/logs")},
		{"metadata.namespace", false, "edge"},
		{"metadata.uid", false, PodUID("gw-1", "edge/logs", "0123456789abcdef0123")},
		{"metadata.labels['app']", false, "logs"},
		{"metadata.labels['missing']", false, ""},
		{"metadata.annotations['note']", false, `say "hi"`},
		{"metadata.labels", false, "app=\"logs\"\ntier=\"node\""},
		{"metadata.annotations", false, `note="say \"hi\""`},
		{"spec.nodeName", false, "gw-1"},
		{"spec.serviceAccountName", false, "shipper"},
		{"status.hostIP", false, "10.0.0.5"},
		{"status.hostIPs", false, "10.0.0.5,fd00::5"},
		{"status.podIP", false, ""},
		{"status.podIPs", false, ""},
		{"status.podIP", true, "10.0.0.5"},
		{"status.podIPs", true, "10.0.0.5,fd00::5"},
		{"node.labels['site']", false, "berlin"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			tmpl := schema.PodTemplateSpec{Metadata: meta, Spec: schema.PodSpec{HostNetwork: tc.hostNetwork, ServiceAccountName: "shipper",
				Containers: []schema.Container{{Name: "c", Image: "x:1", Env: []schema.EnvVar{fieldEnv(tc.path)}}}}}
			got, err := envOf(t, ic, tmpl)
			require.NoError(t, err)
			assert.Equal(t, []string{"V=" + tc.want}, got)
		})
	}
	t.Run("unknown path names the field", func(t *testing.T) {
		tmpl := testTemplateWithEnv(fieldEnv("status.phase"))
		_, err := envOf(t, ic, tmpl)
		require.EqualError(t, err, `spec.containers[0].env[0] (V): valueFrom.fieldRef: unsupported fieldPath "status.phase"`)
	})
}

func testTemplateWithEnv(env ...schema.EnvVar) schema.PodTemplateSpec {
	return schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: env}}}}
}

func TestResourceFieldRef(t *testing.T) {
	res := schema.ResourceRequirements{
		Limits:   schema.ResourceList{"cpu": "250m", "memory": "100Mi"},
		Requests: schema.ResourceList{"memory": "10M"},
	}
	other := schema.Container{Name: "other", Image: "x:1", Resources: schema.ResourceRequirements{Limits: schema.ResourceList{"cpu": "2"}}}
	q := func(s string) *schema.Quantity { v := schema.Quantity(s); return &v }
	tests := []struct {
		name string
		sel  schema.ResourceFieldSelector
		want string
	}{
		{"cpu limit rounds up to whole cores", schema.ResourceFieldSelector{Resource: "limits.cpu"}, "1"},
		{"cpu limit in millicores", schema.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, "250"},
		{"memory limit in Mi", schema.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}, "100"},
		{"memory limit in bytes", schema.ResourceFieldSelector{Resource: "limits.memory"}, "104857600"},
		{"memory request rounds up", schema.ResourceFieldSelector{Resource: "requests.memory", Divisor: q("1Mi")}, "10"},
		{"unset request takes the limit", schema.ResourceFieldSelector{Resource: "requests.cpu", Divisor: q("1m")}, "250"},
		{"unset limit is the node's allocatable", schema.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "other2"}, "4"},
		{"another container", schema.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "other", Divisor: q("1m")}, "2000"},
		{"unset request without limit is 0", schema.ResourceFieldSelector{Resource: "requests.cpu", ContainerName: "other2"}, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{
				{Name: "c", Image: "x:1", Resources: res, Env: []schema.EnvVar{{Name: "V", ValueFrom: &schema.EnvVarSource{ResourceFieldRef: &tc.sel}}}},
				other, {Name: "other2", Image: "x:1"},
			}}}
			got, err := envOf(t, testContext(), tmpl)
			require.NoError(t, err)
			assert.Equal(t, []string{"V=" + tc.want}, got)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		spec schema.PodSpec
		want string
	}{
		{"missing configmap for a key", schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: []schema.EnvVar{
			{Name: "A", ValueFrom: &schema.EnvVarSource{ConfigMapKeyRef: &schema.ConfigMapKeySelector{Name: "x", Key: "k"}}}}}}}, `configmap "x" not found`},
		{"missing configmap key", schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: []schema.EnvVar{
			{Name: "A", ValueFrom: &schema.EnvVarSource{ConfigMapKeyRef: &schema.ConfigMapKeySelector{Name: "cfg", Key: "k"}}}}}}}, `couldn't find key k in ConfigMap edge/cfg`},
		{"missing secret for a key", schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: []schema.EnvVar{
			{Name: "A", ValueFrom: &schema.EnvVarSource{SecretKeyRef: &schema.SecretKeySelector{Name: "x", Key: "k"}}}}}}}, `secret "x" not found`},
		{"missing secret key", schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: []schema.EnvVar{
			{Name: "A", ValueFrom: &schema.EnvVarSource{SecretKeyRef: &schema.SecretKeySelector{Name: "api", Key: "k"}}}}}}}, `couldn't find key k in Secret edge/api`},
		{"missing envFrom secret", schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", EnvFrom: []schema.EnvFromSource{
			{SecretRef: &schema.SecretEnvSource{Name: "x"}}}}}}, `secret "x" not found`},
		{"missing configmap volume", schema.PodSpec{Volumes: []schema.Volume{{Name: "v", ConfigMap: &schema.ConfigMapVolumeSource{Name: "x"}}},
			Containers: []schema.Container{{Name: "c", Image: "x:1"}}}, `configmap "x" not found`},
		{"missing configmap volume item", schema.PodSpec{Volumes: []schema.Volume{{Name: "v", ConfigMap: &schema.ConfigMapVolumeSource{Name: "cfg", Items: []schema.KeyToPath{{Key: "nope", Path: "p"}}}}},
			Containers: []schema.Container{{Name: "c", Image: "x:1"}}}, `configmap references non-existent config key: nope`},
		{"missing secret volume", schema.PodSpec{Volumes: []schema.Volume{{Name: "v", Secret: &schema.SecretVolumeSource{SecretName: "x"}}},
			Containers: []schema.Container{{Name: "c", Image: "x:1"}}}, `secret "x" not found`},
		{"missing projected secret key", schema.PodSpec{Volumes: []schema.Volume{{Name: "v", Projected: &schema.ProjectedVolumeSource{Sources: []schema.VolumeProjection{
			{Secret: &schema.SecretProjection{Name: "api", Items: []schema.KeyToPath{{Key: "nope", Path: "p"}}}}}}}},
			Containers: []schema.Container{{Name: "c", Image: "x:1"}}}, `references non-existent secret key: nope`},
		{"missing configmap in an init container", schema.PodSpec{InitContainers: []schema.Container{{Name: "i", Image: "x:1", EnvFrom: []schema.EnvFromSource{
			{ConfigMapRef: &schema.ConfigMapEnvSource{Name: "y"}}}}}, Containers: []schema.Container{{Name: "c", Image: "x:1"}}}, `configmap "y" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildInstance(testContext(), schema.PodTemplateSpec{Spec: tc.spec})
			var cfgErr *ConfigError
			require.ErrorAs(t, err, &cfgErr)
			assert.Equal(t, tc.want, err.Error(), "the kubelet's message, nothing around it")
		})
	}
}

func TestBuildInstanceExpandsCommandAndArgs(t *testing.T) {
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{
		Name: "c", Image: "x:1", Command: []string{"/bin/$(BIN)"}, Args: []string{"--ip=$(MY_IP)", "--node=$(NODE)", "$$(NODE)", "$(UNKNOWN)"},
		Env: []schema.EnvVar{fieldEnv("status.hostIP"), {Name: "MY_IP", Value: "$(V)"}, {Name: "BIN", Value: "agent"},
			{Name: "NODE", ValueFrom: &schema.EnvVarSource{FieldRef: &schema.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
	}}}}
	spec, err := BuildInstance(testContext(), tmpl)
	require.NoError(t, err)
	c := spec.Containers[0]
	assert.Equal(t, []string{"/bin/agent"}, c.Entrypoint)
	assert.Equal(t, []string{"--ip=10.0.0.5", "--node=gw-1", "$(NODE)", "$(UNKNOWN)"}, c.Cmd)
}

func TestPodIdentity(t *testing.T) {
	name := PodName("gw-1", "kube-system/fluentd-elasticsearch")
	assert.Regexp(t, `^fluentd-elasticsearch-[bcdfghjklmnpqrstvwxz2456789]{5}$`, name)
	assert.Equal(t, name, PodName("gw-1", "other-ns/fluentd-elasticsearch"), "derived from the node name only")
	assert.NotEqual(t, name, PodName("gw-2", "kube-system/fluentd-elasticsearch"))
	long := PodName("gw-1", "ns/a-very-long-daemonset-name-that-goes-on-and-on-past-the-limit-of-63")
	assert.LessOrEqual(t, len(long), 63)

	uid := PodUID("gw-1", "edge/logs", "rev1")
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, uid)
	assert.Equal(t, uid, PodUID("gw-1", "edge/logs", "rev1"), "deterministic")
	assert.NotEqual(t, uid, PodUID("gw-1", "edge/logs", "rev2"), "a new revision is a new pod")
	assert.NotEqual(t, uid, PodUID("gw-2", "edge/logs", "rev1"))
}

func TestHostIPsOf(t *testing.T) {
	tests := []struct {
		name  string
		addrs []schema.NodeAddress
		want  []string
	}{
		{"internal first", []schema.NodeAddress{{Type: "ExternalIP", Address: "1.2.3.4"}, {Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "gw"}}, []string{"10.0.0.1", "1.2.3.4"}},
		{"no internal", []schema.NodeAddress{{Type: "ExternalIP", Address: "1.2.3.4"}}, []string{"1.2.3.4"}},
		{"hostname only", []schema.NodeAddress{{Type: "Hostname", Address: "gw"}}, []string{"gw"}},
		{"none", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, HostIPsOf(tc.addrs)) })
	}
}
