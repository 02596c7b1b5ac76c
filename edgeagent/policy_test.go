package edgeagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func TestLocalPolicyCheck(t *testing.T) {
	hostPath := func(p string) schema.PodSpec {
		return schema.PodSpec{Containers: []schema.Container{{Name: "a"}}, Volumes: []schema.Volume{{Name: "v", HostPath: &schema.HostPathVolumeSource{Path: p}}}}
	}
	privileged := schema.PodSpec{Containers: []schema.Container{{Name: "ok"}, {Name: "root", SecurityContext: &schema.SecurityContext{Privileged: ptr(true)}}}}
	strict := LocalPolicy{RefusePrivileged: true, RefuseHostNetwork: true, RefuseHostPID: true, RestrictHostPaths: true, AllowedHostPaths: []string{"/var/log", "/data/"}}
	tests := []struct {
		name   string
		policy LocalPolicy
		spec   schema.PodSpec
		want   []string // substrings of the refusal; nil means allowed
	}{
		{"zero policy allows all", LocalPolicy{}, schema.PodSpec{HostNetwork: true, HostPID: true, Containers: privileged.Containers}, nil},
		{"privileged refused", strict, privileged, []string{"spec.containers[1].securityContext.privileged (root)"}},
		{"host network refused", strict, schema.PodSpec{HostNetwork: true}, []string{"spec.hostNetwork"}},
		{"host pid refused", strict, schema.PodSpec{HostPID: true}, []string{"spec.hostPID"}},
		{"all reasons listed", strict, schema.PodSpec{HostNetwork: true, HostPID: true}, []string{"spec.hostNetwork", "spec.hostPID"}},
		{"allowed prefix", strict, hostPath("/var/log/app"), nil},
		{"exact prefix", strict, hostPath("/data"), nil},
		{"sibling of prefix", strict, hostPath("/var/logs"), []string{`spec.volumes[0].hostPath.path "/var/logs"`}},
		{"escape with dots", strict, hostPath("/var/log/../../etc"), []string{"spec.volumes[0].hostPath.path"}},
		{"relative path", strict, hostPath("var/log"), []string{"spec.volumes[0].hostPath.path"}},
		{"restricted with empty allowlist", LocalPolicy{RestrictHostPaths: true}, hostPath("/tmp"), []string{"outside the allowed host paths"}},
		{"unrestricted host paths", LocalPolicy{RefusePrivileged: true}, hostPath("/etc"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(schema.PodTemplateSpec{Spec: tc.spec})
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
