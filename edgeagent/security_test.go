package edgeagent

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func TestApplySecurity(t *testing.T) {
	localhost := "profiles/audit.json"
	tests := []struct {
		name string
		pod  *schema.PodSecurityContext
		c    *schema.SecurityContext
		want ContainerSpec
	}{
		{"nothing set", nil, nil, ContainerSpec{}},
		{"pod user and group", &schema.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000))}, nil, ContainerSpec{User: "1000:2000"}},
		{"container wins", &schema.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsNonRoot: ptr(true)},
			&schema.SecurityContext{RunAsUser: ptr(int64(0)), RunAsNonRoot: ptr(false)}, ContainerSpec{User: "0"}},
		{"group without user keeps the image's user", &schema.PodSecurityContext{RunAsGroup: ptr(int64(5))}, nil, ContainerSpec{}},
		{"fsGroup then supplementalGroups", &schema.PodSecurityContext{FSGroup: ptr(int64(2000)), SupplementalGroups: []int64{3000, 2000}}, nil,
			ContainerSpec{GroupAdd: []string{"2000", "3000"}}},
		{"capabilities lose the CAP_ prefix, ALL kept", nil, &schema.SecurityContext{Capabilities: &schema.Capabilities{Add: []string{"CAP_NET_ADMIN", "sys_time"}, Drop: []string{"ALL"}}},
			ContainerSpec{CapAdd: []string{"NET_ADMIN", "SYS_TIME"}, CapDrop: []string{"ALL"}}},
		{"read-only root, no privilege escalation, unmasked proc", nil,
			&schema.SecurityContext{ReadOnlyRootFilesystem: ptr(true), AllowPrivilegeEscalation: ptr(false), ProcMount: ptr(schema.ProcMountUnmasked), Privileged: ptr(true)},
			ContainerSpec{ReadOnlyRootfs: true, NoNewPrivileges: true, UnmaskedProc: true, Privileged: true}},
		{"allowPrivilegeEscalation true changes nothing", nil, &schema.SecurityContext{AllowPrivilegeEscalation: ptr(true)}, ContainerSpec{}},
		{"sysctls", &schema.PodSecurityContext{Sysctls: []schema.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}}, nil,
			ContainerSpec{Sysctls: map[string]string{"net.core.somaxconn": "1024"}}},
		{"seccomp RuntimeDefault", &schema.PodSecurityContext{SeccompProfile: &schema.SeccompProfile{Type: schema.SeccompRuntimeDefault}}, nil, ContainerSpec{}},
		{"seccomp Unconfined from the container", &schema.PodSecurityContext{SeccompProfile: &schema.SeccompProfile{Type: schema.SeccompRuntimeDefault}},
			&schema.SecurityContext{SeccompProfile: &schema.SeccompProfile{Type: schema.SeccompUnconfined}}, ContainerSpec{Seccomp: "unconfined"}},
		{"seccomp Localhost", &schema.PodSecurityContext{SeccompProfile: &schema.SeccompProfile{Type: schema.SeccompLocalhost, LocalhostProfile: &localhost}}, nil,
			ContainerSpec{Seccomp: "/etc/seccomp/profiles/audit.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got ContainerSpec
			require.NoError(t, applySecurity(&got, schema.PodSpec{SecurityContext: tc.pod}, schema.Container{SecurityContext: tc.c}, "/etc/seccomp"))
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("Localhost profile may not leave the directory", func(t *testing.T) {
		escape := "../../etc/shadow"
		var got ContainerSpec
		err := applySecurity(&got, schema.PodSpec{}, schema.Container{SecurityContext: &schema.SecurityContext{
			SeccompProfile: &schema.SeccompProfile{Type: schema.SeccompLocalhost, LocalhostProfile: &escape}}}, "/etc/seccomp")
		require.ErrorContains(t, err, "securityContext.seccompProfile: localhostProfile")
	})
}

func TestBuildInstanceSecurityAndWorkingDir(t *testing.T) {
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		SecurityContext: &schema.PodSecurityContext{RunAsUser: ptr(int64(65534)), FSGroup: ptr(int64(2000))},
		Containers: []schema.Container{{Name: "c", Image: "x:1", WorkingDir: "/work",
			SecurityContext: &schema.SecurityContext{Capabilities: &schema.Capabilities{Drop: []string{"ALL"}}}}},
	}}
	spec, err := BuildInstance(testContext(), tmpl)
	require.NoError(t, err)
	c := spec.Containers[0]
	assert.Equal(t, "65534", c.User)
	assert.Equal(t, []string{"2000"}, c.GroupAdd)
	assert.Equal(t, []string{"ALL"}, c.CapDrop)
	assert.Equal(t, "/work", c.WorkingDir)
}

func dockerConfigSecret(t *testing.T, name string, auths map[string]dockerConfigEntry) schema.Secret {
	t.Helper()
	b, err := json.Marshal(dockerConfigJSON{Auths: auths})
	require.NoError(t, err)
	return schema.Secret{Metadata: schema.ObjectMeta{Name: name}, Type: schema.SecretTypeDockerConfigJSON, Data: map[string][]byte{schema.DockerConfigJSONKey: b}}
}

func TestPullAuthFor(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("hub:pw"))
	secrets := map[string]schema.Secret{
		"hub":    dockerConfigSecret(t, "hub", map[string]dockerConfigEntry{"https://index.docker.io/v1/": {Auth: basic}}),
		"corp":   dockerConfigSecret(t, "corp", map[string]dockerConfigEntry{"registry.corp:5000": {Username: "u", Password: "p"}}),
		"team":   dockerConfigSecret(t, "team", map[string]dockerConfigEntry{"registry.corp:5000/team": {Username: "team", Password: "tp"}}),
		"opaque": {Metadata: schema.ObjectMeta{Name: "opaque"}, Type: schema.SecretTypeOpaque, Data: map[string][]byte{schema.DockerConfigJSONKey: []byte(`{"auths":{"ghcr.io":{"auth":"eDp5"}}}`)}},
		"broken": {Metadata: schema.ObjectMeta{Name: "broken"}, Type: schema.SecretTypeDockerConfigJSON, Data: map[string][]byte{schema.DockerConfigJSONKey: []byte(`{`)}},
	}
	refs := func(names ...string) []schema.LocalObjectReference {
		var out []schema.LocalObjectReference
		for _, n := range names {
			out = append(out, schema.LocalObjectReference{Name: n})
		}
		return out
	}
	tests := []struct {
		name, image string
		refs        []schema.LocalObjectReference
		want        *RegistryAuth
	}{
		{"docker hub short name", "busybox:1.36", refs("hub"), &RegistryAuth{Username: "hub", Password: "pw", Server: "https://index.docker.io/v1/"}},
		{"docker hub alias", "registry-1.docker.io/prom/node-exporter:v1", refs("hub"), &RegistryAuth{Username: "hub", Password: "pw", Server: "https://index.docker.io/v1/"}},
		{"other registry", "registry.corp:5000/x/y:1", refs("hub", "corp"), &RegistryAuth{Username: "u", Password: "p", Server: "registry.corp:5000"}},
		{"longest path wins", "registry.corp:5000/team/app:1", refs("corp", "team"), &RegistryAuth{Username: "team", Password: "tp", Server: "registry.corp:5000/team"}},
		{"path must match whole components", "registry.corp:5000/teamwork/app:1", refs("team"), nil},
		{"no match keeps the device's own", "ghcr.io/x:1", refs("hub", "corp"), nil},
		{"missing, wrong type and unreadable secrets are skipped", "ghcr.io/x:1", refs("absent", "opaque", "broken"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pullAuthFor(tc.image, tc.refs, secrets))
		})
	}
}
