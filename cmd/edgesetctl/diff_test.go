package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
)

// namedDaemonSet writes a daemonset manifest named name to dir/file.
func namedDaemonSet(t *testing.T, dir, file, name, image string) string {
	t.Helper()
	path := filepath.Join(dir, file)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: %s, namespace: monitoring}
spec:
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - {name: main, image: "%s"}
`, name, name, name, image)), 0o644))
	return path
}

func TestCLIApplyPrune(t *testing.T) {
	c := startFleet(t, 0)
	dir := t.TempDir()
	namedDaemonSet(t, dir, "a.yaml", "a", "a:1")
	b := namedDaemonSet(t, dir, "sub/b.yaml", "b", "b:1")
	hand := namedDaemonSet(t, t.TempDir(), "hand.yaml", "hand", "hand:1")
	c.ok("apply", "-f", hand)
	assert.Equal(t, "daemonset/monitoring/a created\ndaemonset/monitoring/b created\n", c.ok("apply", "-f", dir, "--prune"))

	dss := daemonSetList(t, c.ok("get", "ds", "-n", "monitoring", "-o", "json"))
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	for _, d := range dss {
		if d.Metadata.Name != "hand" {
			assert.Equal(t, "cli:"+abs, d.Status.Source, d.Metadata.Name)
		}
	}

	require.NoError(t, os.Remove(b))
	assert.Equal(t, "daemonset/monitoring/a unchanged (server dry run)\ndaemonset/monitoring/b pruned (server dry run)\n",
		c.ok("apply", "-f", dir, "--prune", "--dry-run=server"))
	assert.Equal(t, "daemonset/monitoring/a unchanged\ndaemonset/monitoring/b pruned\n", c.ok("apply", "-f", dir, "--prune"))
	assert.Equal(t, "daemonset/a\ndaemonset/hand\n", c.ok("get", "ds", "-n", "monitoring", "-o", "name"),
		"a daemonset applied from another path is never pruned")

	code, _, errOut := c.run("apply", "-f", "-", "--prune")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--prune needs -f FILE|DIR")
}

func TestCLIDiff(t *testing.T) {
	c := startFleet(t, 2)
	waitUntil(t, "2 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 2
	})
	v1 := manifest(t, "exporter:1")

	code, out, errOut := c.run("diff", "-f", v1)
	require.Equal(t, 1, code, errOut)
	assert.Contains(t, out, "daemonset/monitoring/exporter created\n  nodes: 0 now, 2 after\n")
	assert.Contains(t, out, `+ spec.template.spec.containers[0].image: "exporter:1"`)
	assert.Empty(t, errOut)

	c.ok("apply", "-f", v1)
	assert.Empty(t, c.ok("diff", "-f", v1), "no differences: exit 0 and nothing printed")

	v2 := manifest(t, "exporter:2")
	code, out, _ = c.run("diff", "-f", v2)
	require.Equal(t, 1, code)
	assert.Equal(t, `daemonset/monitoring/exporter configured
  nodes: 2 now, 2 after
  - spec.template.spec.containers[0].image: "exporter:1"
  + spec.template.spec.containers[0].image: "exporter:2"
`, out)

	sensor, err := os.ReadFile(v1)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "sensor.yaml")
	require.NoError(t, os.WriteFile(path, bytes.Replace(sensor, []byte("role: gateway"), []byte("role: sensor"), 1), 0o644))
	code, out, _ = c.run("diff", "-f", path)
	require.Equal(t, 1, code)
	assert.Contains(t, out, "  nodes: 2 now, 0 after\n")
	assert.Contains(t, out, `  - spec.template.spec.nodeSelector.role: "gateway"`+"\n"+`  + spec.template.spec.nodeSelector.role: "sensor"`)
	dss := daemonSetList(t, c.ok("get", "ds", "-n", "monitoring", "-o", "json"))
	require.Len(t, dss, 1)
	assert.Equal(t, "exporter:1", dss[0].Spec.Template.Spec.Containers[0].Image, "diff changes nothing")
}

func TestGetSourcesGolden(t *testing.T) {
	t.Parallel()
	srcs := []api.Source{
		{Path: "/etc/edgeset/manifests/exporter.yaml", Status: api.SourceApplied, DaemonSets: []string{"monitoring/node-exporter"},
			ConfigMaps: []string{"monitoring/exporter-flags"}, Secrets: []string{"monitoring/basic-auth"}, LastApplied: ago(5 * time.Minute)},
		{Path: "/etc/edgeset/manifests/fluentd.yaml", Status: api.SourceInvalid, DaemonSets: []string{"logging/fluentd"}, LastApplied: ago(3 * time.Hour),
			Errors: []string{"/etc/edgeset/manifests/fluentd.yaml:12: spec.template.spec.containers[0].image: required", "/etc/edgeset/manifests/fluentd.yaml:3: metadata.name: required"}},
		{Path: "/etc/edgeset/manifests/old.yaml", Status: api.SourceRemoved, DaemonSets: []string{"default/old", "default/older"}},
		{Path: "/etc/edgeset/manifests/empty.yaml", Status: api.SourceApplied, LastApplied: ago(time.Minute)},
	}
	for _, tc := range []struct{ name, format string }{{"get-sources", outputTable}, {"get-sources-wide", outputWide}, {"get-sources-json", outputJSON}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, printSources(&buf, tc.format, srcs, fixedNow))
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), buf.Bytes())
		})
	}
}

func TestFieldDiff(t *testing.T) {
	got := fieldDiff(
		map[string]string{"a": "1", "b": "2", "c": "3"},
		map[string]string{"a": "1", "b": "20", "d": "4"})
	assert.Equal(t, []string{"- b: 2", "+ b: 20", "- c: 3", "+ d: 4"}, got)
}
