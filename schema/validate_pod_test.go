package schema

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidatePodFields covers the rules of the fields issue 12 gave a
// meaning: each case mutates a valid daemonset and lists every problem
// ("field: message") validation must report.
func TestValidatePodFields(t *testing.T) {
	const pod = "spec.template.spec"
	c0 := pod + ".containers[0]"
	env := func(e ...EnvVar) func(*DaemonSet) {
		return func(ds *DaemonSet) { ds.Spec.Template.Spec.Containers[0].Env = e }
	}
	fieldRef := func(p string) *EnvVarSource { return &EnvVarSource{FieldRef: &ObjectFieldSelector{FieldPath: p}} }
	vol := func(v Volume) func(*DaemonSet) {
		return func(ds *DaemonSet) { ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, v) }
	}
	mount := func(m VolumeMount) func(*DaemonSet) {
		return func(ds *DaemonSet) {
			c := &ds.Spec.Template.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, m)
		}
	}
	sc := func(s SecurityContext) func(*DaemonSet) {
		return func(ds *DaemonSet) { ds.Spec.Template.Spec.Containers[0].SecurityContext = &s }
	}
	initC := func(c Container) func(*DaemonSet) {
		return func(ds *DaemonSet) {
			ds.Spec.Template.Spec.InitContainers = append(ds.Spec.Template.Spec.InitContainers, c)
		}
	}
	tests := []struct {
		name   string
		mutate func(*DaemonSet)
		want   []string
	}{
		{"env name with '='", env(EnvVar{Name: "A=B", Value: "x"}, EnvVar{Name: ""}, EnvVar{Name: "ok.name-1", Value: "y"}), []string{
			c0 + `.env[0].name: invalid variable name "A=B": must consist of printable ASCII characters other than '='`,
			c0 + ".env[1].name: required",
		}},
		{"valueFrom with two sources and a value", env(EnvVar{Name: "X", Value: "v", ValueFrom: &EnvVarSource{
			FieldRef:     &ObjectFieldSelector{FieldPath: "spec.nodeName"},
			SecretKeyRef: &SecretKeySelector{Name: "s", Key: "k"},
		}}), []string{
			c0 + ".env[0].valueFrom: may not be set together with value",
			c0 + ".env[0].valueFrom: must have exactly one source (fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef), has 2",
		}},
		{"valueFrom without source", env(EnvVar{Name: "X", ValueFrom: &EnvVarSource{}}), []string{
			c0 + ".env[0].valueFrom: must have exactly one source (fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef), has 0",
		}},
		{"every supported fieldPath", env(
			EnvVar{Name: "A", ValueFrom: fieldRef("metadata.name")}, EnvVar{Name: "B", ValueFrom: fieldRef("metadata.namespace")},
			EnvVar{Name: "C", ValueFrom: fieldRef("metadata.uid")}, EnvVar{Name: "D", ValueFrom: fieldRef("metadata.labels['app']")},
			EnvVar{Name: "E", ValueFrom: fieldRef("metadata.annotations['example.com/Note']")}, EnvVar{Name: "F", ValueFrom: fieldRef("spec.nodeName")},
			EnvVar{Name: "G", ValueFrom: fieldRef("spec.serviceAccountName")}, EnvVar{Name: "H", ValueFrom: fieldRef("status.hostIP")},
			EnvVar{Name: "I", ValueFrom: fieldRef("status.hostIPs")}, EnvVar{Name: "J", ValueFrom: fieldRef("status.podIP")},
			EnvVar{Name: "K", ValueFrom: fieldRef("status.podIPs")}, EnvVar{Name: "L", ValueFrom: fieldRef("node.labels['site']")},
		), nil},
		{"unknown fieldPath", env(EnvVar{Name: "X", ValueFrom: fieldRef("spec.hostname")}), []string{
			c0 + `.env[0].valueFrom.fieldRef.fieldPath: unsupported fieldPath "spec.hostname": want one of metadata.name, metadata.namespace, metadata.uid, spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP, status.podIPs, metadata.labels['<key>'], metadata.annotations['<key>'], node.labels['<key>']`,
		}},
		{"whole labels in env", env(EnvVar{Name: "X", ValueFrom: fieldRef("metadata.labels")}), []string{
			c0 + `.env[0].valueFrom.fieldRef.fieldPath: unsupported fieldPath "metadata.labels" in env (Kubernetes allows it only in a downwardAPI volume; use a subscript such as metadata.labels['app']): want one of metadata.name, metadata.namespace, metadata.uid, spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP, status.podIPs, metadata.labels['<key>'], metadata.annotations['<key>'], node.labels['<key>']`,
		}},
		{"bad subscripts", env(
			EnvVar{Name: "A", ValueFrom: fieldRef("metadata.labels['-bad']")},
			EnvVar{Name: "B", ValueFrom: fieldRef("spec.nodeName['x']")},
			EnvVar{Name: "C", ValueFrom: &EnvVarSource{FieldRef: &ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}},
		), []string{
			c0 + `.env[0].valueFrom.fieldRef.fieldPath: invalid label key "-bad": name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`,
			c0 + `.env[1].valueFrom.fieldRef.fieldPath: unsupported subscript on "spec.nodeName": only metadata.labels['<key>'] and metadata.annotations['<key>'], node.labels['<key>'] take one`,
			c0 + `.env[2].valueFrom.fieldRef.apiVersion: unsupported apiVersion "v2": want v1`,
		}},
		{"node.labels under apps/v1", func(ds *DaemonSet) {
			ds.APIVersion = APIVersionApps
			env(EnvVar{Name: "SITE", ValueFrom: fieldRef("node.labels['site']")})(ds)
		}, []string{
			c0 + `.env[0].valueFrom.fieldRef.fieldPath: node.labels['site'] is edgeset's extension of the downward API: only allowed with apiVersion edgeset.io/v1, not apps/v1`,
		}},
		{"resourceFieldRef", env(
			EnvVar{Name: "A", ValueFrom: &EnvVarSource{ResourceFieldRef: &ResourceFieldSelector{Resource: "limits.memory", Divisor: ptr(Quantity("1Mi"))}}},
			EnvVar{Name: "B", ValueFrom: &EnvVarSource{ResourceFieldRef: &ResourceFieldSelector{Resource: "limits.gpu"}}},
			EnvVar{Name: "C", ValueFrom: &EnvVarSource{ResourceFieldRef: &ResourceFieldSelector{Resource: "requests.cpu", Divisor: ptr(Quantity("2"))}}},
			EnvVar{Name: "D", ValueFrom: &EnvVarSource{ResourceFieldRef: &ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}}},
		), []string{
			c0 + `.env[1].valueFrom.resourceFieldRef.resource: unsupported resource "limits.gpu": want one of limits.cpu, limits.memory, limits.ephemeral-storage, requests.cpu, requests.memory, requests.ephemeral-storage`,
			c0 + `.env[2].valueFrom.resourceFieldRef.divisor: unsupported divisor "2" for requests.cpu: want one of 1m, 1`,
			c0 + `.env[3].valueFrom.resourceFieldRef.containerName: no container named "nope" in this pod`,
		}},
		{"key refs", env(
			EnvVar{Name: "A", ValueFrom: &EnvVarSource{ConfigMapKeyRef: &ConfigMapKeySelector{Name: "Cfg", Key: "a/b"}}},
			EnvVar{Name: "B", ValueFrom: &EnvVarSource{SecretKeyRef: &SecretKeySelector{Key: "k"}}},
		), []string{
			c0 + `.env[0].valueFrom.configMapKeyRef.name: invalid configmap name "Cfg": must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.')`,
			c0 + `.env[0].valueFrom.configMapKeyRef.key: invalid key "a/b": must consist of alphanumerics, '-', '_' or '.' (it becomes a file name)`,
			c0 + `.env[1].valueFrom.secretKeyRef.name: required: the name of a secret`,
		}},
		{"envFrom", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].EnvFrom = []EnvFromSource{
				{ConfigMapRef: &ConfigMapEnvSource{Name: "a"}, SecretRef: &SecretEnvSource{Name: "b"}},
				{Prefix: "X=", SecretRef: &SecretEnvSource{Name: "b"}},
				{},
			}
		}, []string{
			c0 + ".envFrom[0]: must have exactly one of configMapRef and secretRef, has 2",
			c0 + `.envFrom[1].prefix: invalid prefix "X=": must consist of printable ASCII characters other than '='`,
			c0 + ".envFrom[2]: must have exactly one of configMapRef and secretRef, has 0",
		}},
		{"subPath with ..", mount(VolumeMount{Name: "data", MountPath: "/a", SubPath: "x/../../etc"}), []string{
			c0 + `.volumeMounts[1].subPath: must not contain a '..' element: "x/../../etc" would leave the volume`,
		}},
		{"subPath and subPathExpr", mount(VolumeMount{Name: "data", MountPath: "/a", SubPath: "x", SubPathExpr: "/$(POD)"}), []string{
			c0 + ".volumeMounts[1].subPathExpr: subPath and subPathExpr are mutually exclusive",
			c0 + `.volumeMounts[1].subPathExpr: must be a relative path, not "/$(POD)"`,
		}},
		{"mount propagation", func(ds *DaemonSet) {
			mount(VolumeMount{Name: "data", MountPath: "/a", MountPropagation: ptr("Bidirectional")})(ds)
			mount(VolumeMount{Name: "data", MountPath: "/b", MountPropagation: ptr("Shared")})(ds)
			mount(VolumeMount{Name: "data", MountPath: "/data/"})(ds)
		}, []string{
			c0 + ".volumeMounts[1].mountPropagation: Bidirectional is only allowed in a privileged container, as in Kubernetes",
			c0 + `.volumeMounts[2].mountPropagation: unsupported value "Shared": want None, HostToContainer or Bidirectional`,
			c0 + `.volumeMounts[3].mountPath: duplicate mount path "/data/" in this container`,
		}},
		{"bidirectional when privileged", func(ds *DaemonSet) {
			sc(SecurityContext{Privileged: ptr(true)})(ds)
			mount(VolumeMount{Name: "data", MountPath: "/a", MountPropagation: ptr("Bidirectional")})(ds)
		}, nil},
		{"capability that does not exist", sc(SecurityContext{Capabilities: &Capabilities{
			Add: []string{"NET_ADMIN", "cap_sys_time", "CAP_BPF", "NET_FLY"}, Drop: []string{"all", "CAP_ALL_THE_THINGS"},
		}}), []string{
			c0 + `.securityContext.capabilities.add[3]: unknown capability "NET_FLY": want ALL or a Linux capability such as NET_ADMIN (with or without CAP_)`,
			c0 + `.securityContext.capabilities.drop[1]: unknown capability "CAP_ALL_THE_THINGS": want ALL or a Linux capability such as NET_ADMIN (with or without CAP_)`,
		}},
		{"security context values", sc(SecurityContext{
			RunAsUser: ptr(int64(-1)), RunAsGroup: ptr(int64(1 << 32)), ProcMount: ptr("Masked"),
			Privileged: ptr(true), AllowPrivilegeEscalation: ptr(false),
			SeccompProfile: &SeccompProfile{Type: SeccompRuntimeDefault, LocalhostProfile: ptr("x.json")},
		}), []string{
			c0 + ".securityContext.runAsUser: must be between 0 and 2147483647, not -1",
			c0 + ".securityContext.runAsGroup: must be between 0 and 2147483647, not 4294967296",
			c0 + ".securityContext.seccompProfile.localhostProfile: only allowed when type is Localhost",
			c0 + `.securityContext.procMount: unsupported value "Masked": want Default or Unmasked`,
			c0 + ".securityContext.allowPrivilegeEscalation: cannot be false in a privileged container, as in Kubernetes",
		}},
		{"seccomp localhost", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.SecurityContext = &PodSecurityContext{SeccompProfile: &SeccompProfile{Type: SeccompLocalhost}}
			sc(SecurityContext{SeccompProfile: &SeccompProfile{Type: SeccompLocalhost, LocalhostProfile: ptr("../x.json")}})(ds)
			ds.Spec.Template.Spec.InitContainers = []Container{{Name: "i", Image: "i:1", SecurityContext: &SecurityContext{SeccompProfile: &SeccompProfile{Type: "Strict"}}}}
		}, []string{
			pod + `.initContainers[0].securityContext.seccompProfile.type: unsupported type "Strict": want RuntimeDefault, Unconfined or Localhost`,
			c0 + `.securityContext.seccompProfile.localhostProfile: must not contain a '..' element: "../x.json" would leave the volume`,
			pod + ".securityContext.seccompProfile.localhostProfile: required when type is Localhost",
		}},
		{"pod security context", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.SecurityContext = &PodSecurityContext{
				FSGroup: ptr(int64(-2)), SupplementalGroups: []int64{1, -1}, FSGroupChangePolicy: ptr("Never"),
				Sysctls: []Sysctl{{Name: "net.ipv4.ip_forward", Value: "1"}, {Name: "net/ipv4/ip_forward", Value: "1"}, {Name: "Net.Core"}},
			}
		}, []string{
			pod + ".securityContext.fsGroup: must be between 0 and 2147483647, not -2",
			pod + ".securityContext.supplementalGroups[1]: must be between 0 and 2147483647, not -1",
			pod + `.securityContext.fsGroupChangePolicy: unsupported value "Never": want OnRootMismatch or Always`,
			pod + `.securityContext.sysctls[1].name: duplicate sysctl "net/ipv4/ip_forward"`,
			pod + `.securityContext.sysctls[2].name: invalid sysctl name "Net.Core": must be dot- or slash-separated lowercase alphanumerics, '-' and '_', such as net.ipv4.ip_forward`,
		}},
		{"init container rules", func(ds *DaemonSet) {
			initC(Container{Name: "agent", Image: "i:1"})(ds)
			initC(Container{Name: "setup", Image: "i:1", RestartPolicy: ptr("OnFailure")})(ds)
			initC(Container{Name: "wait", Image: "i:1", ReadinessProbe: &Probe{Exec: &ExecAction{Command: []string{"true"}}},
				Lifecycle: &Lifecycle{PreStop: &LifecycleHandler{Sleep: &SleepAction{Seconds: 1}}}})(ds)
			initC(Container{Name: "sidecar", Image: "i:1", RestartPolicy: ptr(RestartPolicyAlways),
				StartupProbe: &Probe{Exec: &ExecAction{Command: []string{"true"}}}, Ports: []ContainerPort{{ContainerPort: 0}},
				VolumeMounts: []VolumeMount{{Name: "nope", MountPath: "/x"}}})(ds)
			ds.Spec.Template.Spec.Containers[0].RestartPolicy = ptr(RestartPolicyAlways)
		}, []string{
			pod + `.initContainers[1].restartPolicy: unsupported value "OnFailure": only Always (a sidecar) is allowed on an init container`,
			pod + ".initContainers[2].readinessProbe: not allowed on an init container that runs to completion; only a sidecar (restartPolicy: Always) may have it",
			pod + ".initContainers[2].lifecycle: not allowed on an init container that runs to completion; only a sidecar (restartPolicy: Always) may have it",
			pod + ".initContainers[3].ports[0].containerPort: must be between 1 and 65535, not 0",
			pod + `.initContainers[3].volumeMounts[0].name: volume "nope" is not declared in spec.template.spec.volumes`,
			c0 + `.name: duplicate container name "agent" (also initContainers[0])`,
			c0 + ".restartPolicy: only allowed on init containers (restartPolicy: Always makes a sidecar)",
		}},
		{"lifecycle handlers", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(10))
			ds.Spec.Template.Spec.Containers[0].Lifecycle = &Lifecycle{
				PostStart: &LifecycleHandler{Exec: &ExecAction{}, HTTPGet: &HTTPGetAction{Port: FromInt(0)}},
				PreStop:   &LifecycleHandler{Sleep: &SleepAction{Seconds: 20}},
			}
		}, []string{
			c0 + ".lifecycle.postStart.exec.command: required",
			c0 + ".lifecycle.postStart.httpGet.port: must be between 1 and 65535, not 0",
			c0 + ".lifecycle.postStart: must have exactly one handler (exec, httpGet, tcpSocket or sleep), has 2",
			c0 + ".lifecycle.preStop.sleep.seconds: must be between 1 and the termination grace period (10), not 20",
		}},
		{"startup probe and termination", func(ds *DaemonSet) {
			c := &ds.Spec.Template.Spec.Containers[0]
			c.StartupProbe = &Probe{TCPSocket: &TCPSocketAction{Port: FromString("http")}, SuccessThreshold: 2}
			c.TerminationMessagePath = "termination-log"
			c.TerminationMessagePolicy = "Always"
			c.WorkingDir = "work"
		}, []string{
			c0 + ".startupProbe.successThreshold: must be 1, not 2",
			c0 + `.workingDir: must be an absolute path, not "work"`,
			c0 + `.terminationMessagePath: must be an absolute path, not "termination-log"`,
			c0 + `.terminationMessagePolicy: unsupported value "Always": want File or FallbackToLogsOnError`,
		}},
		{"configMap volume items", vol(Volume{Name: "cfg", ConfigMap: &ConfigMapVolumeSource{
			Name:        "cfg",
			DefaultMode: ptr(int32(0o1777)),
			Items: []KeyToPath{
				{Key: "a", Path: "/etc/a"}, {Key: "b", Path: "x/../../b"}, {Key: "c/d", Path: "c", Mode: ptr(int32(-1))},
				{Key: "e", Path: "c"}, {Key: "f", Path: "..data/f"}, {Key: "g"},
			},
		}}), []string{
			pod + `.volumes[1].configMap.items[0].path: must be a relative path, not "/etc/a"`,
			pod + `.volumes[1].configMap.items[1].path: must not contain a '..' element: "x/../../b" would leave the volume`,
			pod + `.volumes[1].configMap.items[2].key: invalid key "c/d": must consist of alphanumerics, '-', '_' or '.' (it becomes a file name)`,
			pod + ".volumes[1].configMap.items[2].mode: must be a file mode between 0 and 0777 (octal; 511 in decimal), not -1",
			pod + `.volumes[1].configMap.items[3].path: duplicate path "c" in this volume (also spec.template.spec.volumes[1].configMap.items[2].path)`,
			pod + `.volumes[1].configMap.items[4].path: must not start with '..' (reserved for the atomic update of the volume): "..data/f"`,
			pod + ".volumes[1].configMap.items[5].path: required",
			pod + ".volumes[1].configMap.defaultMode: must be a file mode between 0 and 0777 (octal; 511 in decimal), not 1023",
		}},
		{"secret, emptyDir and hostPath volumes", func(ds *DaemonSet) {
			vol(Volume{Name: "s", Secret: &SecretVolumeSource{}})(ds)
			vol(Volume{Name: "e", EmptyDir: &EmptyDirVolumeSource{Medium: "HugePages", SizeLimit: ptr(Quantity("0"))}})(ds)
			vol(Volume{Name: "h", HostPath: &HostPathVolumeSource{Path: "/run/x.sock", Type: "Pipe"}})(ds)
		}, []string{
			pod + ".volumes[1].secret.secretName: required: the name of a secret",
			pod + `.volumes[2].emptyDir.medium: unsupported medium "HugePages": want "" (the device's disk) or Memory (a tmpfs)`,
			pod + `.volumes[2].emptyDir.sizeLimit: must be greater than 0, not "0"`,
			pod + `.volumes[3].hostPath.type: unsupported type "Pipe": want one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice`,
		}},
		{"hostPath with '..'", func(ds *DaemonSet) {
			vol(Volume{Name: "h", HostPath: &HostPathVolumeSource{Path: "/srv/allowed/link/../new"}})(ds)
			vol(Volume{Name: "h2", HostPath: &HostPathVolumeSource{Path: "/srv/..data/x"}})(ds)
		}, []string{
			pod + `.volumes[1].hostPath.path: must not contain '..', not "/srv/allowed/link/../new"`,
		}},
		{"downwardAPI volume", vol(Volume{Name: "info", DownwardAPI: &DownwardAPIVolumeSource{Items: []DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "node", FieldRef: &ObjectFieldSelector{FieldPath: "spec.nodeName"}},
			{Path: "mem", ResourceFieldRef: &ResourceFieldSelector{Resource: "limits.memory"}},
			{Path: "cpu", ResourceFieldRef: &ResourceFieldSelector{ContainerName: "agent", Resource: "limits.cpu", Divisor: ptr(Quantity("1m"))}},
			{Path: "none"},
		}}}), []string{
			pod + `.volumes[1].downwardAPI.items[1].fieldRef.fieldPath: unsupported fieldPath "spec.nodeName" in a downwardAPI volume (Kubernetes allows it only in env): want one of metadata.name, metadata.namespace, metadata.uid, metadata.labels, metadata.annotations, metadata.labels['<key>'], metadata.annotations['<key>'], node.labels['<key>']`,
			pod + ".volumes[1].downwardAPI.items[2].resourceFieldRef.containerName: required in a downwardAPI volume",
			pod + ".volumes[1].downwardAPI.items[4]: must have exactly one of fieldRef and resourceFieldRef, has none",
		}},
		{"projected volume", vol(Volume{Name: "all", Projected: &ProjectedVolumeSource{Sources: []VolumeProjection{
			{ConfigMap: &ConfigMapProjection{Name: "c", Items: []KeyToPath{{Key: "a", Path: "conf"}}}},
			{Secret: &SecretProjection{Name: "s", Items: []KeyToPath{{Key: "b", Path: "conf"}}}},
			{},
		}}}), []string{
			pod + `.volumes[1].projected.sources[1].secret.items[0].path: duplicate path "conf" in this volume (also spec.template.spec.volumes[1].projected.sources[0].configMap.items[0].path)`,
			pod + ".volumes[1].projected.sources[2]: must have exactly one source (configMap, secret or downwardAPI), has 0",
		}},
		{"duplicate host ports", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, Container{
				Name: "second", Image: "x:1", Ports: []ContainerPort{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 81, HostPort: 8080, Protocol: ProtocolUDP}},
			})
		}, []string{pod + ".containers[1].ports[0].hostPort: duplicate host port 8080/TCP: another port of this pod binds it"}},
		{"image pull secrets and service account", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.ImagePullSecrets = []LocalObjectReference{{Name: "regcred"}, {Name: "Reg_Cred"}}
			ds.Spec.Template.Spec.ServiceAccountName = "Agent"
		}, []string{
			pod + `.imagePullSecrets[1].name: invalid secret name "Reg_Cred": must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.')`,
			pod + `.serviceAccountName: invalid name "Agent": must be a DNS-1123 subdomain`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := validDS()
			tc.mutate(ds)
			err := ValidateDaemonSet(ds)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			var got []string
			for _, fe := range ve.Errors {
				got = append(got, fe.Error())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCapabilityName(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"NET_ADMIN", "NET_ADMIN", true},
		{"net_admin", "NET_ADMIN", true},
		{"CAP_SYS_TIME", "SYS_TIME", true},
		{"cap_checkpoint_restore", "CHECKPOINT_RESTORE", true},
		{"all", "ALL", true},
		{" cap_chown ", "CHOWN", true},
		{"CAP_ALL", "ALL", true},
		{"NET_FLY", "NET_FLY", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := CapabilityName(tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.ok, ok, tc.in)
	}
	assert.Len(t, linuxCapabilities, 41, "CAP_CHOWN (0) to CAP_CHECKPOINT_RESTORE (40)")
}

func TestSplitFieldPath(t *testing.T) {
	tests := []struct {
		in, base, key string
		ok            bool
	}{
		{"metadata.labels['app']", "metadata.labels", "app", true},
		{"metadata.annotations['a.io/b']", "metadata.annotations", "a.io/b", true},
		{"node.labels['x']", "node.labels", "x", true},
		{"metadata.name", "metadata.name", "", false},
		{"metadata.labels[app]", "metadata.labels[app]", "", false},
	}
	for _, tc := range tests {
		base, key, ok := SplitFieldPath(tc.in)
		assert.Equal(t, []any{tc.base, tc.key, tc.ok}, []any{base, key, ok}, tc.in)
	}
}

// TestDecodeBadPodInput: bad input in a manifest is refused with the
// field as written and its line.
func TestDecodeBadPodInput(t *testing.T) {
	withContainer := func(apiVersion, c string) string {
		return `apiVersion: ` + apiVersion + `
kind: DaemonSet
metadata: {name: app}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      volumes:
      - {name: cfg, configMap: {name: cfg}}
      containers:
      - name: c
        image: img:1
` + c
	}
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"node.labels under apps/v1", withContainer("apps/v1", "        env:\n        - name: SITE\n          valueFrom: {fieldRef: {fieldPath: \"node.labels['site']\"}}\n"),
			[]string{"x.yaml:16: spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: node.labels['site'] is edgeset's extension of the downward API: only allowed with apiVersion edgeset.io/v1, not apps/v1"}},
		{"subPath with ..", withContainer("apps/v1", "        volumeMounts:\n        - {name: cfg, mountPath: /etc/app.conf, subPath: ../../etc/shadow}\n"),
			[]string{`x.yaml:15: spec.template.spec.containers[0].volumeMounts[0].subPath: must not contain a '..' element: "../../etc/shadow" would leave the volume`}},
		{"capability that does not exist", withContainer("apps/v1", "        securityContext:\n          capabilities:\n            add: [NET_ADMIN, SYS_MAGIC]\n"),
			[]string{`x.yaml:16: spec.template.spec.containers[0].securityContext.capabilities.add[1]: unknown capability "SYS_MAGIC": want ALL or a Linux capability such as NET_ADMIN (with or without CAP_)`}},
		{"grpc probe", withContainer("apps/v1", "        livenessProbe:\n          grpc: {port: 9090}\n"),
			[]string{"x.yaml:15: spec.template.spec.containers[0].livenessProbe.grpc: gRPC probes are not supported on edge devices yet: use an exec probe running grpc_health_probe, or httpGet/tcpSocket"}},
		{"unknown security field", withContainer("apps/v1", "        securityContext:\n          runAsRoot: true\n"),
			[]string{"x.yaml:15: spec.template.spec.containers[0].securityContext.runAsRoot: unknown field"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode("x.yaml", []byte(tc.in))
			assert.Equal(t, tc.want, problems(t, err))
		})
	}
	objs, _, err := Decode("x.yaml", []byte(withContainer("edgeset.io/v1", "        env:\n        - name: SITE\n          valueFrom: {fieldRef: {fieldPath: \"node.labels['site']\"}}\n")))
	require.NoError(t, err, "node.labels is allowed under edgeset.io/v1")
	assert.Equal(t, "node.labels['site']", objs[0].DaemonSet.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath)
}
