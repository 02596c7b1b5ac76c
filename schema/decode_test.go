package schema

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const manifests = "testdata/manifests/"

// problems renders a decode error as its list of "file:line: field: message"
// lines, failing the test if it is not a *ValidationError.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "want *ValidationError, got %T: %v", err, err)
	out := make([]string, len(ve.Errors))
	for i, fe := range ve.Errors {
		out[i] = fe.Error()
	}
	return out
}

func warningLines(ws []Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("%d: %s", w.Line, w.Field)
	}
	return out
}

func TestDecodeValidFixtures(t *testing.T) {
	tests := []struct {
		file     string
		keys     []string
		warnings []string // "line: field"
	}{
		{file: "fluentd-elasticsearch.yaml", keys: []string{"kube-system/fluentd-elasticsearch"}},
		{
			file: "node-exporter.yaml",
			keys: []string{"monitoring/node-exporter"},
			warnings: []string{
				"29: spec.template.spec.serviceAccountName",
				"30: spec.template.spec.automountServiceAccountToken",
				"35: spec.template.spec.priorityClassName",
			},
		},
		{file: "multi.yaml", keys: []string{"plant/modbus-gateway", "default/security-agent"}},
		{file: "mqtt-bridge.json", keys: []string{"edge/mqtt-bridge"}},
		{
			file: "kubernetes-export.yaml",
			keys: []string{"default/log-shipper"},
			warnings: []string{
				"8: metadata.uid",
				"9: metadata.resourceVersion",
				"10: metadata.generation",
				"11: metadata.creationTimestamp",
				"18: spec.template.metadata.creationTimestamp",
				"22: spec.template.spec.dnsPolicy",
				"47: status",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			objs, warns, err := DecodeFile(manifests + tc.file)
			require.NoError(t, err)
			var keys []string
			for _, o := range objs {
				require.Equal(t, KindDaemonSet, o.Kind())
				require.Equal(t, manifests+tc.file, o.Source.File)
				keys = append(keys, o.DaemonSet.Key())
				require.NoError(t, ValidateDaemonSet(o.DaemonSet), "decoded objects are valid")
			}
			assert.Equal(t, tc.keys, keys)
			if tc.warnings == nil {
				tc.warnings = []string{}
			}
			assert.Equal(t, tc.warnings, warningLines(warns))
			for _, w := range warns {
				assert.Equal(t, manifests+tc.file, w.File)
				assert.True(t, strings.HasPrefix(w.Message, prefixIgnored) || strings.HasPrefix(w.Message, prefixPartial), w.Message)
				assert.Equal(t, WarningKubernetesOnly, w.Class, "%s: these fixtures lose nothing a device could give", w.Field)
			}
		})
	}
}

func TestDecodeFluentdContent(t *testing.T) {
	objs, _, err := DecodeFile(manifests + "fluentd-elasticsearch.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	ds := objs[0].DaemonSet
	assert.Equal(t, Source{File: manifests + "fluentd-elasticsearch.yaml", Document: 0, Item: -1, Line: 2}, objs[0].Source)
	assert.Equal(t, APIVersionApps, ds.APIVersion)
	pod := ds.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, Quantity("200Mi"), c.Resources.Limits["memory"])
	assert.Equal(t, ResourceList{"cpu": "100m", "memory": "200Mi"}, c.Resources.Requests)
	assert.Equal(t, []Volume{{Name: "varlog", HostPath: &HostPathVolumeSource{Path: "/var/log"}}}, pod.Volumes)
	assert.Equal(t, int64(30), *pod.TerminationGracePeriodSeconds)
	assert.Equal(t, Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"}, pod.Tolerations[0])
	// Defaults are applied.
	assert.Equal(t, PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, RollingUpdateStrategy, ds.Spec.UpdateStrategy.Type)
	assert.Equal(t, FromInt(1), *ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable)
}

// TestDecodeKeepsConfigVolumesAndEnv: an exported daemonset's configMap
// volume and fieldRef variable, dropped before edgeset gave them a meaning,
// now decode.
func TestDecodeKeepsConfigVolumesAndEnv(t *testing.T) {
	objs, _, err := DecodeFile(manifests + "kubernetes-export.yaml")
	require.NoError(t, err)
	pod := objs[0].DaemonSet.Spec.Template.Spec
	c := pod.Containers[0]
	assert.Equal(t, []EnvVar{
		{Name: "NODE_NAME", ValueFrom: &EnvVarSource{FieldRef: &ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "LOG_LEVEL", Value: "info"},
	}, c.Env)
	assert.Equal(t, DefaultTerminationMessagePath, c.TerminationMessagePath)
	assert.Equal(t, []VolumeMount{{Name: "config", MountPath: "/fluent-bit/etc"}, {Name: "varlog", MountPath: "/var/log", ReadOnly: true}}, c.VolumeMounts)
	assert.Equal(t, []Volume{
		{Name: "config", ConfigMap: &ConfigMapVolumeSource{Name: "log-shipper-config"}},
		{Name: "varlog", HostPath: &HostPathVolumeSource{Path: "/var/log"}},
	}, pod.Volumes)
}

func TestDecodeDropsUnprovidedVolumes(t *testing.T) {
	in := minimalDS("apps/v1", "") + `      volumes:
      - name: data
        persistentVolumeClaim: {claimName: data}
      - name: logs
        hostPath: {path: /var/log}
`
	in = strings.Replace(in, `{name: c, image: "img:1"}`, `{name: c, image: "img:1", volumeMounts: [{name: data, mountPath: /data}, {name: logs, mountPath: /logs}]}`, 1)
	objs, warns, err := Decode("x.yaml", []byte(in))
	require.NoError(t, err)
	var lines []string
	for _, w := range warns {
		assert.Equal(t, WarningChangesDaemon, w.Class)
		lines = append(lines, w.String())
	}
	assert.Equal(t, []string{
		`x.yaml:12: spec.template.spec.containers[0].volumeMounts[0]: ignored: nothing is mounted at /data: volume "data" (persistentVolumeClaim) is not provided on edge devices`,
		`x.yaml:14: spec.template.spec.volumes[0]: ignored: volume "data" (persistentVolumeClaim) is not provided: persistent volume claims need Kubernetes storage provisioning; the volume and its mounts are dropped`,
	}, lines)
	pod := objs[0].DaemonSet.Spec.Template.Spec
	assert.Equal(t, []VolumeMount{{Name: "logs", MountPath: "/logs"}}, pod.Containers[0].VolumeMounts)
	assert.Equal(t, []Volume{{Name: "logs", HostPath: &HostPathVolumeSource{Path: "/var/log"}}}, pod.Volumes)
}

func TestDecodeMultiDocument(t *testing.T) {
	objs, _, err := DecodeFile(manifests + "multi.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, Source{File: manifests + "multi.yaml", Document: 0, Item: -1, Line: 3}, objs[0].Source)
	assert.Equal(t, Source{File: manifests + "multi.yaml", Document: 1, Item: 0, Line: 61}, objs[1].Source)
	r := objs[0].DaemonSet.Spec.Rollout
	require.NotNil(t, r)
	assert.True(t, r.AutoRollback)
	assert.Equal(t, FromString("20%"), *r.FailureThreshold)
	assert.Equal(t, FromInt(2), *r.Canary.Nodes)
	assert.Equal(t, OnDeleteStrategy, objs[1].DaemonSet.Spec.UpdateStrategy.Type)
	assert.Nil(t, objs[1].DaemonSet.Spec.UpdateStrategy.RollingUpdate)
	assert.Equal(t, PullAlways, objs[1].DaemonSet.Spec.Template.Spec.Containers[0].ImagePullPolicy, "untagged image")
}

func TestDecodeJSON(t *testing.T) {
	objs, _, err := DecodeFile(manifests + "mqtt-bridge.json")
	require.NoError(t, err)
	c := objs[0].DaemonSet.Spec.Template.Spec.Containers[0]
	assert.Equal(t, Quantity("0.5"), c.Resources.Requests["cpu"], "a JSON number is a quantity")
	assert.Equal(t, []ContainerPort{{ContainerPort: 1883, HostPort: 1883, Protocol: ProtocolTCP}}, c.Ports)
	assert.Equal(t, FromInt(1), *objs[0].DaemonSet.Spec.UpdateStrategy.RollingUpdate.MaxSurge)
}

func TestDecodeInvalidFieldsFixture(t *testing.T) {
	objs, _, err := DecodeFile(manifests + "invalid-fields.yaml")
	assert.Empty(t, objs)
	f := manifests + "invalid-fields.yaml"
	assert.Equal(t, []string{
		f + ":14: spec.template.spec.hostNetwork: must be a boolean (true or false), not a string",
		f + ":17: spec.template.spec.containers[0].imagee: unknown field",
		f + ":22: spec.template.spec.containers[0].env[0].value: must be a string, not an integer",
		f + ":25: spec.template.spec.volumes[0].hostpath: unknown field",
		f + `:28: apiVersion: unsupported apiVersion "apps/v1beta2" for kind DaemonSet: want apps/v1 or edgeset.io/v1`,
		f + `:34: kind: unsupported kind "Deployment": edgeset manifests hold DaemonSets, ConfigMaps and Secrets (or a List of them)`,
	}, problems(t, err))
}

func TestDecodeInvalidValuesFixture(t *testing.T) {
	objs, _, err := DecodeFile(manifests + "invalid-values.yaml")
	assert.Empty(t, objs)
	f := manifests + "invalid-values.yaml:"
	aff := "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
	c0 := "spec.template.spec.containers[0]"
	assert.Equal(t, []string{
		f + `4: metadata.name: invalid name "Bad_Name": must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', at most 253 characters)`,
		f + `5: metadata.namespace: invalid namespace "edge.site": must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)`,
		f + `12: spec.updateStrategy.rollingUpdate: only allowed with type RollingUpdate`,
		f + `13: spec.updateStrategy.rollingUpdate.maxUnavailable: must not be more than 100%, not "150%"`,
		f + `14: spec.revisionHistoryLimit: must be >= 0, not -1`,
		f + `15: spec.rollout: only allowed with apiVersion edgeset.io/v1, not apps/v1`,
		f + `19: spec.template.metadata.labels: selector does not match template labels: spec.selector must select them`,
		f + `22: spec.template.spec.restartPolicy: unsupported value "OnFailure": a daemon always restarts, so only Always is allowed`,
		f + `26: spec.template.spec.tolerations[0].value: must be empty when operator is Exists`,
		f + `29: spec.template.spec.tolerations[1].tolerationSeconds: only allowed with effect NoExecute or an empty effect`,
		f + `37: ` + aff + `.matchExpressions[0].values[0]: must be an integer for operator Gt, not "1Gi"`,
		f + `39: ` + aff + `.matchFields[0].key: unsupported field "metadata.labels": only metadata.name is supported`,
		f + `40: ` + aff + `.matchFields[0].operator: unsupported operator "Exists" for matchFields: want In or NotIn`,
		f + `43: ` + c0 + `.image: required`,
		f + `44: ` + c0 + `.imagePullPolicy: unsupported value "Sometimes": want Always, IfNotPresent or Never`,
		f + `47: ` + c0 + `.ports[0].hostPort: must be between 1 and 65535 (or 0 for none), not 70000`,
		f + `48: ` + c0 + `.ports[0].protocol: unsupported protocol "SCTP": want TCP or UDP`,
		f + `51: ` + c0 + `.resources.limits[memory]: quantity "1Gb": unknown unit suffix "Gb" (want one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent e<n>)`,
		f + `53: ` + c0 + `.volumeMounts[0].name: volume "missing" is not declared in spec.template.spec.volumes`,
		f + `54: ` + c0 + `.volumeMounts[0].mountPath: must be an absolute path, not "data"`,
		f + `55: ` + c0 + `.livenessProbe: must have exactly one handler (exec, httpGet or tcpSocket), has 0`,
		f + `56: ` + c0 + `.livenessProbe.periodSeconds: must be >= 0, not -5`,
		f + `57: spec.template.spec.containers[1].name: duplicate container name "collector"`,
		f + `62: spec.template.spec.volumes[0].hostPath.path: must be an absolute path, not "var/log"`,
		f + `63: spec.template.spec.volumes[1].name: duplicate volume name "logs"`,
	}, problems(t, err))
}

// TestDecodeErrors covers decode-level problems on small inline inputs.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "rollout under apps/v1",
			in:   minimalDS("apps/v1", "  rollout:\n    paused: true\n"),
			want: []string{"x.yaml:13: spec.rollout: only allowed with apiVersion edgeset.io/v1, not apps/v1"},
		},
		{
			name: "unknown top-level and nested fields",
			in:   minimalDS("apps/v1", "  replicas: 3\n") + "extra: 1\n",
			want: []string{"x.yaml:13: spec.replicas: unknown field", "x.yaml:14: extra: unknown field"},
		},
		{
			name: "duplicate field",
			in:   "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: a\n  name: b\n",
			want: []string{"x.yaml:5: metadata.name: duplicate field"},
		},
		{
			name: "activeDeadlineSeconds, which Kubernetes rejects in a DaemonSet",
			in:   minimalDS("apps/v1", "") + "      activeDeadlineSeconds: 60\n",
			want: []string{"x.yaml:13: spec.template.spec.activeDeadlineSeconds: not allowed in a DaemonSet, as in Kubernetes: a daemon runs until it is replaced"},
		},
		{
			name: "kind missing",
			in:   "apiVersion: apps/v1\nmetadata:\n  name: a\n",
			want: []string{"x.yaml:1: kind: required"},
		},
		{
			name: "document not an object",
			in:   "- a\n- b\n",
			want: []string{"x.yaml:1: document 0: must be an object, not a list"},
		},
		{
			name: "list without items",
			in:   "apiVersion: v1\nkind: List\n",
			want: []string{"x.yaml:1: items: required: a kind: List must have a list of items"},
		},
		{
			name: "integer out of range",
			in:   minimalDS("apps/v1", "  minReadySeconds: 3000000000\n"),
			want: []string{"x.yaml:13: spec.minReadySeconds: must be an integer between -2147483648 and 2147483647, not 3000000000"},
		},
		{
			name: "null list item",
			in:   strings.Replace(minimalDS("apps/v1", ""), "containers:\n", "containers:\n      - null\n", 1),
			want: []string{"x.yaml:12: spec.template.spec.containers[0]: must not be null"},
		},
		{
			name: "validation error after a dropped volume names the written index",
			in: minimalDS("apps/v1", "") + "      volumes:\n      - name: cfg\n        configMap: {name: c}\n" +
				"      - name: data\n        hostPath: {path: relative}\n",
			want: []string{`x.yaml:17: spec.template.spec.volumes[1].hostPath.path: must be an absolute path, not "relative"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode("x.yaml", []byte(tc.in))
			assert.Equal(t, tc.want, problems(t, err))
		})
	}
}

// minimalDS returns a valid daemonset whose spec ends with extraSpec
// (indented two spaces) on line 13.
func minimalDS(apiVersion, extraSpec string) string {
	return "apiVersion: " + apiVersion + `
kind: DaemonSet
metadata:
  name: app
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
      - {name: c, image: "img:1"}
` + extraSpec
}

func TestDecodeRolloutUnderEdgeset(t *testing.T) {
	objs, _, err := Decode("x.yaml", []byte(minimalDS("edgeset.io/v1", "  rollout:\n    paused: true\n")))
	require.NoError(t, err)
	require.True(t, objs[0].DaemonSet.Spec.Rollout.Paused)
}

func TestDecodeSyntaxError(t *testing.T) {
	_, _, err := Decode("bad.yaml", []byte("kind: DaemonSet\n  bad: [\n"))
	assert.Equal(t, []string{"bad.yaml:2: invalid YAML: mapping values are not allowed in this context"}, problems(t, err))
	_, _, err = Decode("bad.yaml", []byte("a: [1, 2\n"))
	lines := problems(t, err)
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "bad.yaml:")
	assert.Contains(t, lines[0], "invalid YAML")
}

func TestDecodeEmptyDocumentsAreSkipped(t *testing.T) {
	objs, warns, err := Decode("x.yaml", []byte("---\n---\n"+minimalDS("apps/v1", "")+"---\n"))
	require.NoError(t, err)
	assert.Empty(t, warns)
	require.Len(t, objs, 1)
	assert.Equal(t, 1, objs[0].Source.Document, "the empty document before it counts")
}

func TestDecodeAliasBudget(t *testing.T) {
	// 1000 aliases of a container holding 1000 aliases of an env var: a few
	// kilobytes that would expand to millions of nodes.
	env := "[&e {name: a, value: b}" + strings.Repeat(", *e", 999) + "]"
	doc := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: a}\nspec:\n" +
		"  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec:\n" +
		"      containers: [&c {name: c, image: i, env: " + env + "}" + strings.Repeat(", *c", 999) + "]\n"
	_, _, err := Decode("x.yaml", []byte(doc))
	lines := problems(t, err)
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "document too large")
}

func TestDecodePathWalksDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	for name, content := range map[string]string{
		"a.yaml":     minimalDS("apps/v1", ""),
		"sub/b.yml":  strings.Replace(minimalDS("apps/v1", ""), "name: app", "name: app2", 1),
		"sub/c.json": `{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "j"}}`,
		"notes.txt":  "not a manifest",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	objs, _, err := DecodePath(dir)
	assert.Len(t, objs, 2, "the valid files decode")
	lines := problems(t, err)
	require.NotEmpty(t, lines)
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, filepath.Join(dir, "sub/c.json")+":1: "), l)
	}
	files, err := ManifestFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "sub/b.yml"), filepath.Join(dir, "sub/c.json")}, files)
}

func TestLocate(t *testing.T) {
	index := map[string]position{
		"spec":                        {line: 5, src: "spec"},
		"spec.volumes[0]":             {line: 9, src: "spec.volumes[1]"},
		"metadata.labels[a.b/c]":      {line: 3, src: "metadata.labels[a.b/c]"},
		"spec.template.spec.host.x.y": {line: 7, src: "spec.template.spec.host.x.y"},
	}
	tests := []struct {
		field, src string
		line       int
	}{
		{"spec.volumes[0].hostPath.path", "spec.volumes[1].hostPath.path", 9},
		{"spec.selector", "spec.selector", 5},
		{"metadata.labels[a.b/c]", "metadata.labels[a.b/c]", 3},
		{"status", "status", 0},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			src, line := locate(index, tc.field)
			assert.Equal(t, tc.src, src)
			assert.Equal(t, tc.line, line)
		})
	}
}

// TestIgnoredTableMatchesOnlyUnknownFields guards the ignored table: an
// entry for a field edgeset's types have would silently drop a supported
// field.
func TestIgnoredTableMatchesOnlyUnknownFields(t *testing.T) {
	for _, f := range daemonSetIgnored {
		t.Run(f.path, func(t *testing.T) {
			if parent, wildcard := strings.CutSuffix(f.path, ".*"); wildcard {
				require.True(t, typeHasPath(parent), "the parent of a wildcard entry must exist")
				return
			}
			require.True(t, typeHasPath(parentPath(f.path)), "the parent of %s must be in the schema", f.path)
			if f.keep {
				require.True(t, typeHasPath(f.path), "%s is kept, so it must be a field of the schema", f.path)
				return
			}
			require.False(t, typeHasPath(f.path), "%s is a field of the schema; it must not be ignored", f.path)
		})
	}
}

// typeHasPath reports whether a generic path ("a.b[*].c") names a field of
// DaemonSet.
func typeHasPath(path string) bool {
	t := reflect.TypeOf(DaemonSet{})
	if path == "" {
		return true
	}
	for _, seg := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(seg, "[*]")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		ft, ok := jsonFields(t)[name]
		if !ok {
			return false
		}
		t = ft
		if list {
			if t.Kind() != reflect.Slice {
				return false
			}
			t = t.Elem()
		}
	}
	return true
}

func TestDecodeVolumeSources(t *testing.T) {
	t.Run("a volume without a source is an emptyDir", func(t *testing.T) {
		in := minimalDS("apps/v1", "") + "      volumes:\n      - name: scratch\n"
		objs, warns, err := Decode("x.yaml", []byte(in))
		require.NoError(t, err)
		assert.Empty(t, warns)
		assert.Equal(t, []Volume{{Name: "scratch", EmptyDir: &EmptyDirVolumeSource{}}}, objs[0].DaemonSet.Spec.Template.Spec.Volumes)
	})
	t.Run("a misspelt source is an error, not a dropped volume", func(t *testing.T) {
		in := minimalDS("apps/v1", "") + "      volumes:\n      - name: data\n        hostPth: {path: /data}\n"
		_, warns, err := Decode("x.yaml", []byte(in))
		assert.Empty(t, warns)
		assert.Equal(t, []string{"x.yaml:15: spec.template.spec.volumes[0].hostPth: unknown field"}, problems(t, err))
	})
	t.Run("two sources are an error, as in Kubernetes", func(t *testing.T) {
		in := minimalDS("apps/v1", "") + "      volumes:\n      - name: data\n        hostPath: {path: /data}\n        nfs: {server: x, path: /}\n"
		_, _, err := Decode("x.yaml", []byte(in))
		assert.Equal(t, []string{"x.yaml:14: spec.template.spec.volumes[0]: must have exactly one volume source, has 2 (hostPath, nfs)"}, problems(t, err))
	})
}

// TestManifestFilesSkipsHidden: a ConfigMap mounted by Kubernetes shows each
// file twice, once through a visible symlink and once in a hidden
// ..<timestamp> directory; editor and VCS files are hidden too.
func TestManifestFilesSkipsHidden(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_29_12_00_00.123")
	require.NoError(t, os.MkdirAll(data, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(data, "ds.yaml"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "x.yaml"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".ds.yaml.swp.yaml"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(data, "ds.yaml"), filepath.Join(dir, "ds.yaml")))
	files, err := ManifestFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "ds.yaml")}, files)
}

// TestDecodeExportedList: what `edgesetctl get -o yaml` prints for several
// objects (a v1 List, server-set metadata, a status on every kind) decodes
// back, and a Secret exported without its values is refused rather than
// applied empty.
func TestDecodeExportedList(t *testing.T) {
	const list = `apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cfg, namespace: edge, generation: 2, resourceVersion: "7", creationTimestamp: "2026-11-27T10:00:00Z"}
  data: {a.yaml: "x: 1"}
  status: {hash: abc, nodes: 3, keys: [{key: a.yaml, size: 4}]}
- apiVersion: v1
  kind: Secret
  metadata: {name: key, namespace: edge, resourceVersion: "4"}
  type: Opaque
  data: {token: czNjcjN0}
  status: {hash: def, nodes: 1, keys: [{key: token, size: 6}]}
`
	objs, _, err := Decode("list.yaml", []byte(list))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, "x: 1", objs[0].ConfigMap.Data["a.yaml"])
	assert.Equal(t, []byte("s3cr3t"), objs[1].Secret.Data["token"])

	const hidden = `apiVersion: v1
kind: Secret
metadata: {name: key, namespace: edge}
type: Opaque
status:
  keys: [{key: token, size: 6}]
`
	_, _, err = Decode("hidden.yaml", []byte(hidden))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Errors, 1)
	assert.Equal(t, "data", ve.Errors[0].Field)
	assert.Equal(t, 1, ve.Errors[0].Line)
	assert.Contains(t, ve.Errors[0].Message, "--show-values")
}
