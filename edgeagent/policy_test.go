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
	hostPathTyped := func(p, typ string) schema.PodSpec {
		s := hostPath(p)
		s.Volumes[0].HostPath.Type = typ
		return s
	}
	withCaps := func(name string, add ...string) schema.PodSpec {
		return schema.PodSpec{Containers: []schema.Container{{Name: name, SecurityContext: &schema.SecurityContext{Capabilities: &schema.Capabilities{Add: add}}}}}
	}
	dropAll := schema.PodSpec{Containers: []schema.Container{{Name: "a", SecurityContext: &schema.SecurityContext{Capabilities: &schema.Capabilities{Drop: []string{"ALL", "SYS_ADMIN"}}}}}}
	withSeccomp := func(pod *schema.SeccompProfile, container string) schema.PodSpec {
		s := schema.PodSpec{Containers: []schema.Container{{Name: "a"}}}
		if pod != nil {
			s.SecurityContext = &schema.PodSecurityContext{SeccompProfile: pod}
		}
		if container != "" {
			s.Containers[0].SecurityContext = &schema.SecurityContext{SeccompProfile: &schema.SeccompProfile{Type: container}}
		}
		return s
	}
	withProcMount := func(m string) schema.PodSpec {
		return schema.PodSpec{Containers: []schema.Container{{Name: "a", SecurityContext: &schema.SecurityContext{ProcMount: &m}}}}
	}
	withSubPath := func(p, sub, expr string) schema.PodSpec {
		s := hostPath(p)
		s.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "v", MountPath: "/m", SubPath: sub, SubPathExpr: expr}}
		return s
	}
	denyAdmin := LocalPolicy{DeniedCapabilities: []string{"SYS_ADMIN", "net_admin"}}
	allowBind := LocalPolicy{AllowedCapabilities: []string{"NET_BIND_SERVICE"}}
	noUnconfined := LocalPolicy{RefuseUnconfinedSeccomp: true, RefuseUnmaskedProcMount: true}
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
		{"every hostPath type checked", strict, hostPathTyped("/run/docker.sock", schema.HostPathSocket), []string{`spec.volumes[0].hostPath.path "/run/docker.sock"`}},
		{"typed hostPath inside allowlist", strict, hostPathTyped("/data/x", schema.HostPathDirectoryOrCreate), nil},
		{"privileged init container refused", strict, schema.PodSpec{InitContainers: privileged.Containers, Containers: []schema.Container{{Name: "main"}}}, []string{"spec.initContainers[1].securityContext.privileged (root)"}},
		{"denied capability", denyAdmin, withCaps("a", "NET_BIND_SERVICE", "SYS_ADMIN"), []string{"spec.containers[0].securityContext.capabilities.add[1] (SYS_ADMIN) is denied"}},
		{"denied capability any spelling", denyAdmin, withCaps("a", "cap_net_admin"), []string{"capabilities.add[0] (cap_net_admin) is denied"}},
		{"denied capability in init container", denyAdmin, schema.PodSpec{InitContainers: withCaps("i", "NET_ADMIN").Containers}, []string{"spec.initContainers[0].securityContext.capabilities.add[0] (NET_ADMIN)"}},
		{"add ALL with a denylist", denyAdmin, withCaps("a", "ALL"), []string{"add[0] (ALL) would add denied capabilities"}},
		{"capability not denied", denyAdmin, withCaps("a", "NET_RAW"), nil},
		{"dropping a denied capability", denyAdmin, dropAll, nil},
		{"deny ALL refuses any add", LocalPolicy{DeniedCapabilities: []string{"ALL"}}, withCaps("a", "CHOWN"), []string{"add[0] (CHOWN) is denied"}},
		{"allowlist allows", allowBind, withCaps("a", "CAP_NET_BIND_SERVICE"), nil},
		{"allowlist refuses others", allowBind, withCaps("a", "NET_BIND_SERVICE", "NET_RAW"), []string{"add[1] (NET_RAW) is not among the capabilities local policy allows"}},
		{"allowlist refuses ALL", allowBind, withCaps("a", "ALL"), []string{"add[0] (ALL) is not among"}},
		{"allowlist of ALL", LocalPolicy{AllowedCapabilities: []string{"ALL"}}, withCaps("a", "ALL"), nil},
		{"privileged under capability policy", denyAdmin, privileged, []string{"spec.containers[1].securityContext.privileged (root) grants every capability"}},
		{"privileged refused once", LocalPolicy{RefusePrivileged: true, DeniedCapabilities: []string{"SYS_ADMIN"}}, privileged, []string{"privileged (root) is refused by local policy"}},
		{"unconfined seccomp", noUnconfined, withSeccomp(nil, schema.SeccompUnconfined), []string{"spec.containers[0].securityContext.seccompProfile.type Unconfined (a)"}},
		{"unconfined seccomp from the pod", noUnconfined, withSeccomp(&schema.SeccompProfile{Type: schema.SeccompUnconfined}, ""), []string{"spec.securityContext.seccompProfile.type Unconfined (a)"}},
		{"container overrides unconfined pod", noUnconfined, withSeccomp(&schema.SeccompProfile{Type: schema.SeccompUnconfined}, schema.SeccompRuntimeDefault), nil},
		{"unconfined seccomp allowed", LocalPolicy{}, withSeccomp(nil, schema.SeccompUnconfined), nil},
		{"unmasked proc mount", noUnconfined, withProcMount(schema.ProcMountUnmasked), []string{"spec.containers[0].securityContext.procMount Unmasked (a)"}},
		{"default proc mount", noUnconfined, withProcMount(schema.ProcMountDefault), nil},
		{"subPath inside an allowed hostPath", strict, withSubPath("/var/log", "app/current", ""), nil},
		{"subPath climbing out of an allowed hostPath", strict, withSubPath("/var/log", "app/../../../etc", ""), []string{`spec.containers[0].volumeMounts[0].subPath "app/../../../etc" leaves hostPath volume "v"`}},
		{"subPathExpr climbing out", strict, withSubPath("/var/log", "", "$(POD)/../.."), []string{`volumeMounts[0].subPathExpr "$(POD)/../.."`}},
		{"absolute subPath", strict, withSubPath("/var/log", "/etc", ""), []string{`subPath "/etc" leaves`}},
		{"dots in a name are not ..", strict, withSubPath("/var/log", "a..b/..c", ""), nil},
		{"subPath unrestricted", LocalPolicy{}, withSubPath("/var/log", "../..", ""), nil},
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

func TestLocalPolicyCheckListsEveryReason(t *testing.T) {
	p := LocalPolicy{RefusePrivileged: true, DeniedCapabilities: []string{"SYS_ADMIN"}, RefuseUnmaskedProcMount: true}
	unmasked := schema.ProcMountUnmasked
	spec := schema.PodSpec{
		InitContainers: []schema.Container{{Name: "init", SecurityContext: &schema.SecurityContext{Privileged: ptr(true)}}},
		Containers: []schema.Container{{Name: "main", SecurityContext: &schema.SecurityContext{
			Capabilities: &schema.Capabilities{Add: []string{"SYS_ADMIN"}}, ProcMount: &unmasked}}},
	}
	err := p.Check(schema.PodTemplateSpec{Spec: spec})
	require.Error(t, err)
	assert.Equal(t, "refused: spec.initContainers[0].securityContext.privileged (init) is refused by local policy; "+
		"spec.containers[0].securityContext.capabilities.add[0] (SYS_ADMIN) is denied by local policy; "+
		"spec.containers[0].securityContext.procMount Unmasked (main) is refused by local policy", err.Error())
}

func TestLocalPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		policy LocalPolicy
		want   []string // substrings of the error; nil means valid
	}{
		{"zero policy", LocalPolicy{}, nil},
		{"known names in every spelling", LocalPolicy{DeniedCapabilities: []string{"SYS_ADMIN", "cap_net_admin", "ALL"}, AllowedCapabilities: []string{"CAP_BPF", "checkpoint_restore"}}, nil},
		{"typo in the denylist", LocalPolicy{DeniedCapabilities: []string{"SYS_ADMN"}}, []string{`denied-capabilities: "SYS_ADMN" is not a Linux capability`}},
		{"every unknown name listed", LocalPolicy{DeniedCapabilities: []string{"X"}, AllowedCapabilities: []string{"NET_ADMIN", "Y"}}, []string{`denied-capabilities: "X"`, `allowed-capabilities: "Y"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Validate()
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
