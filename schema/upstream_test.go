package schema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpstreamManifests decodes DaemonSets adapted from their projects'
// own manifests (testdata/upstream) with their ConfigMaps and Secrets. Each
// must be valid, reference only config objects its file defines, and lose
// nothing a device could give: the only warnings allowed are the
// Kubernetes-only ones listed here, each by line and field.
func TestUpstreamManifests(t *testing.T) {
	const sa = "spec.template.spec.serviceAccountName"
	tests := []struct {
		file    string
		allowed []string // "line: field" of every (kubernetes-only) warning
		check   func(t *testing.T, ds *DaemonSet)
	}{
		{"fluent-bit.yaml", []string{"79: " + sa, "81: spec.template.spec.dnsPolicy"}, func(t *testing.T, ds *DaemonSet) {
			pod := ds.Spec.Template.Spec
			assert.Equal(t, &ConfigMapVolumeSource{Name: "fluent-bit"}, pod.Volumes[0].ConfigMap)
			assert.Equal(t, "/var/lib/docker/containers", pod.Volumes[2].HostPath.Path)
			assert.Equal(t, HostPathFile, pod.Volumes[3].HostPath.Type)
			assert.Equal(t, "spec.nodeName", pod.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath)
		}},
		{"node-exporter.yaml", []string{"32: spec.template.spec.automountServiceAccountToken", "79: spec.template.spec.priorityClassName", "84: " + sa}, func(t *testing.T, ds *DaemonSet) {
			pod := ds.Spec.Template.Spec
			assert.True(t, pod.HostPID && pod.HostNetwork)
			assert.Equal(t, &PodSecurityContext{RunAsUser: ptr(int64(65534)), RunAsGroup: ptr(int64(65534)), RunAsNonRoot: ptr(true)}, pod.SecurityContext)
			sc := pod.Containers[0].SecurityContext
			assert.Equal(t, &Capabilities{Add: []string{"SYS_TIME"}, Drop: []string{"ALL"}}, sc.Capabilities)
			assert.True(t, *sc.ReadOnlyRootFilesystem)
			assert.False(t, *sc.AllowPrivilegeEscalation)
			assert.Equal(t, MountPropagationHostToContainer, *pod.Containers[0].VolumeMounts[0].MountPropagation)
		}},
		{"promtail.yaml", []string{"49: " + sa, "50: spec.template.spec.enableServiceLinks"}, func(t *testing.T, ds *DaemonSet) {
			pod := ds.Spec.Template.Spec
			assert.Equal(t, HostPathDirectoryOrCreate, pod.Volumes[1].HostPath.Type)
			assert.Equal(t, "metadata.labels", pod.Volumes[4].DownwardAPI.Items[0].FieldRef.FieldPath)
			assert.Equal(t, int64(0), *pod.SecurityContext.RunAsUser)
		}},
		{"filebeat.yaml", []string{"62: " + sa, "65: spec.template.spec.dnsPolicy"}, func(t *testing.T, ds *DaemonSet) {
			pod := ds.Spec.Template.Spec
			c := pod.Containers[0]
			assert.Equal(t, int64(0), *c.SecurityContext.RunAsUser)
			assert.Equal(t, VolumeMount{Name: "config", MountPath: "/etc/filebeat.yml", ReadOnly: true, SubPath: "filebeat.yml"}, c.VolumeMounts[0])
			assert.Equal(t, int32(0o640), *pod.Volumes[0].ConfigMap.DefaultMode, "YAML 0640 is octal, as in Kubernetes")
			assert.Equal(t, &HostPathVolumeSource{Path: "/var/lib/filebeat-data", Type: HostPathDirectoryOrCreate}, pod.Volumes[3].HostPath)
			assert.Equal(t, "filebeat-elasticsearch", c.Env[2].ValueFrom.SecretKeyRef.Name)
		}},
		{"falco.yaml", []string{"53: " + sa}, func(t *testing.T, ds *DaemonSet) {
			pod := ds.Spec.Template.Spec
			require.Len(t, pod.InitContainers, 1)
			assert.Equal(t, "falco-driver-loader", pod.InitContainers[0].Name)
			assert.Equal(t, "root-falco-fs", pod.InitContainers[0].VolumeMounts[0].Name)
			assert.Equal(t, &EmptyDirVolumeSource{}, pod.Volumes[0].EmptyDir)
			assert.True(t, *pod.Containers[0].SecurityContext.Privileged)
			assert.Equal(t, HostPathSocket, pod.Volumes[7].HostPath.Type)
			assert.Equal(t, []KeyToPath{{Key: "falco.yaml", Path: "falco.yaml"}}, pod.Volumes[10].ConfigMap.Items)
		}},
		{"datadog.yaml", []string{"251: " + sa, "252: spec.template.spec.automountServiceAccountToken"}, func(t *testing.T, ds *DaemonSet) {
			pod := ds.Spec.Template.Spec
			require.Len(t, pod.InitContainers, 2)
			assert.Equal(t, "config", pod.InitContainers[0].VolumeMounts[0].Name, "init containers share the config emptyDir")
			agent := pod.Containers[0]
			assert.Equal(t, &SecretKeySelector{Name: "datadog-secret", Key: "api-key"}, agent.Env[0].ValueFrom.SecretKeyRef)
			assert.Equal(t, "status.hostIP", agent.Env[3].ValueFrom.FieldRef.FieldPath)
			assert.Equal(t, []EnvFromSource{{ConfigMapRef: &ConfigMapEnvSource{Name: "datadog-env"}}}, agent.EnvFrom)
			assert.NotNil(t, agent.StartupProbe)
			assert.Equal(t, "install_info", agent.VolumeMounts[1].SubPath)
		}},
		{"otel-collector-agent.yaml", []string{"89: " + sa}, func(t *testing.T, ds *DaemonSet) {
			c := ds.Spec.Template.Spec.Containers[0]
			assert.Equal(t, "--set=service.telemetry.resource.host.name=$(K8S_NODE_NAME)", c.Args[1], "$(VAR) is expanded on the device, not at decode")
			assert.Equal(t, "status.hostIP", c.Env[0].ValueFrom.FieldRef.FieldPath)
			assert.Equal(t, &ResourceFieldSelector{Resource: "limits.memory", Divisor: ptr(Quantity("1Mi"))}, c.Env[2].ValueFrom.ResourceFieldRef)
		}},
		{"telegraf.yaml", []string{"69: " + sa}, func(t *testing.T, ds *DaemonSet) {
			c := ds.Spec.Template.Spec.Containers[0]
			assert.Equal(t, []EnvFromSource{{SecretRef: &SecretEnvSource{Name: "telegraf-ds-influx"}}}, c.EnvFrom)
			assert.Equal(t, "status.hostIP", c.Env[0].ValueFrom.FieldRef.FieldPath)
		}},
		{"vector.yaml", []string{"66: " + sa, "67: spec.template.spec.dnsPolicy"}, func(t *testing.T, ds *DaemonSet) {
			p := ds.Spec.Template.Spec.Volumes[0].Projected
			require.NotNil(t, p)
			require.Len(t, p.Sources, 2)
			assert.Equal(t, "vector", p.Sources[0].ConfigMap.Name)
			assert.Equal(t, "pod-labels", p.Sources[1].DownwardAPI.Items[0].Path)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			objs, warns, err := DecodeFile("testdata/upstream/" + tc.file)
			require.NoError(t, err)
			var got []string
			for _, w := range warns {
				got = append(got, fmt.Sprintf("%d: %s", w.Line, w.Field))
				assert.Equal(t, WarningKubernetesOnly, w.Class, "meaning-changing warning: %s", w)
			}
			assert.Equal(t, tc.allowed, got)

			defined := map[string]bool{}
			var ds *DaemonSet
			for _, o := range objs {
				switch {
				case o.ConfigMap != nil:
					defined["configmap/"+o.ConfigMap.Metadata.Name] = true
				case o.Secret != nil:
					defined["secret/"+o.Secret.Metadata.Name] = true
				default:
					require.Nil(t, ds, "one daemonset per file")
					ds = o.DaemonSet
				}
			}
			require.NotNil(t, ds)
			require.NoError(t, ValidateDaemonSet(ds))
			refs := ds.Spec.Template.References()
			for _, n := range refs.ConfigMaps {
				assert.True(t, defined["configmap/"+n], "configmap %q referenced but not in the file", n)
			}
			for _, n := range refs.Secrets {
				assert.True(t, defined["secret/"+n], "secret %q referenced but not in the file", n)
			}
			tc.check(t, ds)
		})
	}
}

// TestNoopValuesDropSilently: a Kubernetes field set to the value that
// changes nothing (tty: false) is dropped without a warning; any other
// value warns.
func TestNoopValuesDropSilently(t *testing.T) {
	in := minimalDS("apps/v1", "") + "      hostIPC: false\n      automountServiceAccountToken: false\n"
	in = replaceContainer(in, `{name: c, image: "img:1", tty: false, stdin: false}`)
	_, warns, err := Decode("x.yaml", []byte(in))
	require.NoError(t, err)
	assert.Empty(t, warns)

	in = minimalDS("apps/v1", "") + "      hostIPC: true\n"
	in = replaceContainer(in, `{name: c, image: "img:1", tty: true}`)
	_, warns, err = Decode("x.yaml", []byte(in))
	require.NoError(t, err)
	assert.Equal(t, []string{"12: spec.template.spec.containers[0].tty", "13: spec.template.spec.hostIPC"}, warningLines(warns))
}

// replaceContainer replaces minimalDS's container with c.
func replaceContainer(doc, c string) string {
	return strings.Replace(doc, `{name: c, image: "img:1"}`, c, 1)
}

// TestDecodeDropsUnprovidableEnvVar: a variable whose value comes from a
// source edgeset lacks (fileKeyRef) is not set at all, rather than set
// empty.
func TestDecodeDropsUnprovidableEnvVar(t *testing.T) {
	in := replaceContainer(minimalDS("apps/v1", ""), `{name: c, image: "img:1", env: [`+
		`{name: A, valueFrom: {fileKeyRef: {volumeName: v, path: p, key: k}}}, {name: B, value: b}]}`)
	objs, warns, err := Decode("x.yaml", []byte(in))
	require.NoError(t, err)
	assert.Equal(t, []EnvVar{{Name: "B", Value: "b"}}, objs[0].DaemonSet.Spec.Template.Spec.Containers[0].Env)
	assert.Equal(t, []string{"12: spec.template.spec.containers[0].env[0].valueFrom.fileKeyRef"}, warningLines(warns))
	assert.Equal(t, WarningChangesDaemon, warns[0].Class)
}
