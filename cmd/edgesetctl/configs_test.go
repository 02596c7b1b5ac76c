package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func goldenConfigMaps() []api.ConfigMap {
	return []api.ConfigMap{{
		ConfigMeta: api.ConfigMeta{Namespace: "edge", Name: "agent-config", Labels: map[string]string{"app": "agent"},
			Generation: 2, ResourceVersion: 7, Hash: "3c1d0e9f8a7b6c5d4e3f", CreatedAt: fixedNow.Add(-50 * time.Hour),
			UpdatedAt: fixedNow.Add(-time.Hour), Source: "cli:/srv/deploy/agent.yaml",
			Keys:         []api.ConfigKey{{Key: "agent.yaml", Size: 412}, {Key: "logo.png", Size: 2048, Binary: true}},
			ReferencedBy: []string{"edge/agent", "edge/uploader"}, Nodes: 12},
		Data: map[string]string{"agent.yaml": "level: info\n"}, BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G'}},
	}, {
		ConfigMeta: api.ConfigMeta{Namespace: "monitoring", Name: "exporter-flags", Generation: 1, ResourceVersion: 3,
			Hash: "9a8b7c6d5e4f3a2b1c0d", CreatedAt: fixedNow.Add(-5 * time.Minute), Keys: []api.ConfigKey{}},
	}}
}

func goldenSecrets() []api.Secret {
	return []api.Secret{{
		ConfigMeta: api.ConfigMeta{Namespace: "edge", Name: "api-key", Generation: 1, ResourceVersion: 4,
			Hash: "0f1e2d3c4b5a69788796", CreatedAt: fixedNow.Add(-3 * time.Hour),
			Keys:         []api.ConfigKey{{Key: "token", Size: 40}},
			ReferencedBy: []string{"edge/agent"}, Nodes: 12},
		Type: "Opaque",
	}, {
		ConfigMeta: api.ConfigMeta{Namespace: "edge", Name: "registry", Generation: 3, ResourceVersion: 9,
			Hash: "aabbccddeeff00112233", CreatedAt: fixedNow.Add(-30 * 24 * time.Hour),
			Keys: []api.ConfigKey{{Key: ".dockerconfigjson", Size: 180}}},
		Type: "kubernetes.io/dockerconfigjson",
	}}
}

func TestGoldenConfigTables(t *testing.T) {
	t.Parallel()
	events := []api.Event{{Seq: 3, Time: fixedNow.Add(-time.Hour), Type: "Normal", Reason: "Applied", Object: "configmap/edge/agent-config",
		Message: "configured: generation 2, 2 key(s)"}}
	cases := []struct {
		name  string
		print func(w *bytes.Buffer) error
	}{
		{"get-configmaps", func(w *bytes.Buffer) error {
			return printConfigMaps(w, outputTable, goldenConfigMaps()[:1], false, fixedNow)
		}},
		{"get-configmaps-all-wide", func(w *bytes.Buffer) error { return printConfigMaps(w, outputWide, goldenConfigMaps(), true, fixedNow) }},
		{"get-configmaps-yaml", func(w *bytes.Buffer) error {
			return printConfigMaps(w, outputYAML, goldenConfigMaps()[:1], false, fixedNow)
		}},
		{"get-secrets", func(w *bytes.Buffer) error { return printSecrets(w, outputTable, goldenSecrets(), false, fixedNow) }},
		{"get-secrets-wide", func(w *bytes.Buffer) error { return printSecrets(w, outputWide, goldenSecrets(), true, fixedNow) }},
		{"get-secrets-yaml", func(w *bytes.Buffer) error { return printSecrets(w, outputYAML, goldenSecrets()[:1], false, fixedNow) }},
		{"get-secrets-name", func(w *bytes.Buffer) error { return printSecrets(w, outputName, goldenSecrets(), false, fixedNow) }},
		{"describe-configmap", func(w *bytes.Buffer) error {
			writeConfig(w, goldenConfigMaps()[0].ConfigMeta, "", events, fixedNow)
			return nil
		}},
		{"describe-daemonset-configs", func(w *bytes.Buffer) error {
			d := goldenDaemonSets()[0]
			pod := &d.Manifest.Spec.Template.Spec
			pod.Volumes = []schema.Volume{{Name: "flags", ConfigMap: &schema.ConfigMapVolumeSource{Name: "exporter-flags"}}}
			pod.Containers[0].EnvFrom = []schema.EnvFromSource{{SecretRef: &schema.SecretEnvSource{Name: "basic-auth"}}}
			writeDaemonSet(w, d, nil, fixedNow)
			return nil
		}},
		{"describe-secret", func(w *bytes.Buffer) error {
			writeConfig(w, goldenSecrets()[0].ConfigMeta, goldenSecrets()[0].Type, nil, fixedNow)
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tc.print(&buf))
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), buf.Bytes())
		})
	}
}

// TestSecretYAMLHasNoValues: without --show-values the controller sends
// no values, and -o yaml prints keys and sizes only.
func TestSecretYAMLHasNoValues(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printSecrets(&buf, outputYAML, goldenSecrets(), false, fixedNow))
	list := decodeYAML(t, buf.String())
	for _, item := range list["items"].([]any) {
		require.NotContains(t, item, "data", buf.String())
	}
	require.True(t, strings.Contains(buf.String(), "size: 40"), buf.String())
}

func TestResourceNamesForConfigs(t *testing.T) {
	for arg, want := range map[string]string{"cm": kindConfigMap, "configmaps": kindConfigMap, "ConfigMap": kindConfigMap,
		"secret": kindSecret, "secrets": kindSecret, "cm/agent-config": kindConfigMap} {
		kind, _, err := resourceKind(arg)
		require.NoError(t, err, arg)
		require.Equal(t, want, kind, arg)
	}
}

func TestConfigDiffs(t *testing.T) {
	live := api.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}}
	next := &schema.ConfigMap{Data: map[string]string{"a": "1", "b": "3", "c": "4"}}
	require.Equal(t, []string{`- data.b: "2"`, `+ data.b: "3"`, `+ data.c: "4"`}, configMapDiff(live, next))

	sec := &schema.Secret{Data: map[string][]byte{"token": []byte("new-value")}}
	lines := secretDiff([]api.ConfigKey{{Key: "token", Size: 3}}, sec)
	require.Equal(t, []string{"- data.token: <3 bytes>", "+ data.token: <9 bytes>"}, lines)
	require.NotContains(t, strings.Join(lines, "\n"), "new-value")
	require.Equal(t, []string{"values changed (not shown)"}, secretDiff([]api.ConfigKey{{Key: "token", Size: 9}}, sec))
}

const configsManifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: agent-config, namespace: monitoring}
data: {agent.yaml: "level: info"}
---
apiVersion: v1
kind: Secret
metadata: {name: api-key, namespace: monitoring}
stringData: {token: s3cr3t-4711}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: monitoring}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - name: main
        image: agent:1
        env:
        - name: TOKEN
          valueFrom: {secretKeyRef: {name: api-key, key: token}}
        volumeMounts: [{name: config, mountPath: /etc/agent}]
      volumes:
      - {name: config, configMap: {name: agent-config}}
`

// TestCLIConfigObjects applies a ConfigMap, a Secret and a daemonset using
// them through a real controller, then gets, describes and deletes them.
func TestCLIConfigObjects(t *testing.T) {
	if _, _, err := schema.Decode("probe.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); err != nil {
		t.Skip("schema.Decode does not decode ConfigMaps yet (the schema part of issue 12)")
	}
	c := startFleet(t, 1)
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte(configsManifest), 0o644))
	require.Equal(t, "configmap/monitoring/agent-config created\nsecret/monitoring/api-key created\ndaemonset/monitoring/agent created\n",
		c.ok("apply", "-f", path))

	out := c.ok("get", "secret", "api-key", "-n", "monitoring", "-o", "yaml")
	require.NotContains(t, out, "s3cr3t")
	require.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte("s3cr3t-4711")))
	require.Contains(t, out, "size: 11")
	out = c.ok("get", "secret", "api-key", "-n", "monitoring", "-o", "yaml", "--show-values")
	require.Contains(t, out, base64.StdEncoding.EncodeToString([]byte("s3cr3t-4711")))

	require.Contains(t, c.ok("get", "cm", "-A"), "agent-config")
	out = c.ok("describe", "cm", "agent-config", "-n", "monitoring")
	require.Contains(t, out, "monitoring/agent")
	require.Contains(t, out, "agent.yaml")

	require.Equal(t, "secret/monitoring/api-key deleted\n", c.ok("delete", "secret", "api-key", "-n", "monitoring"))
	code, _, errOut := c.run("get", "secret", "api-key", "-n", "monitoring")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "not found")
}
