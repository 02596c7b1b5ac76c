package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// runIn runs edgesetctl with stdin.
func (c cli) runIn(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	all := append([]string{"--server", c.server, "--token", c.token}, args...)
	code = run(all, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// okIn is ok with stdin.
func (c cli) okIn(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errOut := c.runIn(stdin, args...)
	require.Equal(c.t, 0, code, "edgesetctl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// object is a printed object or List, decoded generically.
type object = map[string]any

func decodeYAML(t *testing.T, s string) object {
	t.Helper()
	var o object
	require.NoError(t, yaml.Unmarshal([]byte(s), &o), s)
	return o
}

// daemonSetList decodes the List that get ds -o json prints.
func daemonSetList(t *testing.T, s string) []daemonSetObject {
	t.Helper()
	var l struct {
		Kind  string            `json:"kind"`
		Items []daemonSetObject `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(s), &l), s)
	require.Equal(t, "List", l.Kind)
	return l.Items
}

// startFleetWithDaemon starts three nodes running monitoring/exporter.
func startFleetWithDaemon(t *testing.T) cli {
	c := startFleet(t, 3)
	waitUntil(t, "3 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 3
	})
	c.ok("apply", "-f", manifest(t, "exporter:1"))
	c.ok("rollout", "status", "ds", "exporter", "-n", "monitoring", "--interval", "100ms")
	return c
}

// TestCLIOutputRoundTrip: -o yaml and -o json print manifests (one object
// for a name, a v1 List otherwise) that apply and explain read back.
func TestCLIOutputRoundTrip(t *testing.T) {
	c := startFleetWithDaemon(t)

	one := decodeYAML(t, c.ok("get", "ds", "exporter", "-n", "monitoring", "-o", "yaml"))
	assert.Equal(t, "apps/v1", one["apiVersion"])
	assert.Equal(t, "DaemonSet", one["kind"])
	assert.Equal(t, "exporter", one["metadata"].(object)["name"])
	assert.Equal(t, "monitoring", one["metadata"].(object)["namespace"])
	assert.EqualValues(t, 3, one["status"].(object)["numberReady"])
	assert.NotNil(t, one["spec"].(object)["template"])

	exported := c.ok("get", "ds", "exporter", "-n", "monitoring", "-o", "yaml")
	code, out, errOut := c.runIn(exported, "apply", "-f", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "daemonset/monitoring/exporter unchanged\n", out)

	list := c.ok("get", "ds", "-A", "-o", "json")
	var l object
	require.NoError(t, json.Unmarshal([]byte(list), &l))
	assert.Equal(t, "v1", l["apiVersion"])
	assert.Equal(t, "List", l["kind"])
	require.Len(t, l["items"], 1)
	assert.Equal(t, "DaemonSet", l["items"].([]any)[0].(object)["kind"])
	code, out, errOut = c.runIn(list, "apply", "-f", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "daemonset/monitoring/exporter unchanged\n", out)

	// An edited export applies as a change.
	edited := strings.Replace(exported, "exporter:1", "exporter:2", 1)
	assert.Equal(t, "daemonset/monitoring/exporter configured\n", c.okIn(edited, "apply", "-f", "-"))

	nodes := decodeYAML(t, c.ok("get", "nodes", "-o", "yaml"))
	assert.Equal(t, "List", nodes["kind"])
	require.Len(t, nodes["items"], 3)
	node := nodes["items"].([]any)[0].(object)
	assert.Equal(t, "v1", node["apiVersion"])
	assert.Equal(t, "Node", node["kind"])
	assert.Equal(t, "gw-0", node["metadata"].(object)["name"])

	nodeFile := filepath.Join(t.TempDir(), "nodes.yaml")
	require.NoError(t, os.WriteFile(nodeFile, []byte(c.ok("get", "nodes", "-o", "yaml")), 0o644))
	out = c.ok("explain", "-f", manifest(t, "exporter:1"), "--node-file", nodeFile)
	for _, n := range []string{"gw-0", "gw-1", "gw-2"} {
		assert.Contains(t, out, n)
	}
	assert.NotContains(t, out, "no  ", "every exported node runs the daemon:\n"+out)
	single := filepath.Join(t.TempDir(), "node.json")
	require.NoError(t, os.WriteFile(single, []byte(c.ok("get", "node", "gw-1", "-o", "json")), 0o644))
	out = c.ok("explain", "-f", manifest(t, "exporter:1"), "--node-file", single)
	assert.Contains(t, out, "gw-1")
	assert.NotContains(t, out, "gw-0")

	inst := decodeYAML(t, c.ok("get", "instances", "-n", "monitoring", "-o", "yaml"))
	assert.Equal(t, "List", inst["kind"])
	require.Len(t, inst["items"], 3)
}

// TestCLISelectorsAndPrinters: set-based selectors, jsonpath,
// custom-columns and --sort-by against a live fleet.
func TestCLISelectorsAndPrinters(t *testing.T) {
	c := startFleetWithDaemon(t)
	for node, rank := range map[string]string{"gw-0": "c", "gw-1": "a", "gw-2": "b"} {
		c.ok("label", "node", node, "rank="+rank)
	}

	names := func(args ...string) string {
		return c.ok(append([]string{"get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"}, args...)...)
	}
	assert.Equal(t, "gw-0 gw-1 gw-2", names())
	assert.Equal(t, "gw-0 gw-2", names("-l", "site in (0,2)"))
	assert.Equal(t, "gw-1", names("-l", "site notin (0, 2),role=gateway"))
	assert.Equal(t, "gw-0 gw-1 gw-2", names("-l", "site,!zone"))
	assert.Equal(t, "", names("-l", "!site"))
	assert.Equal(t, "gw-1 gw-2 gw-0", names("--sort-by", "{.metadata.labels.rank}"))
	assert.Equal(t, "gw-1 gw-2 gw-0", names("--sort-by", ".metadata.labels.rank"))
	assert.Equal(t, "gw-1", c.ok("get", "node", "gw-1", "-o", "jsonpath={.metadata.name}"))
	assert.Equal(t, "exporter", c.ok("get", "ds", "-n", "monitoring", "-l", "!app,tier notin (x)", "-o", "jsonpath={.items[0].metadata.name}"))

	code, _, errOut := c.run("get", "nodes", "-l", "site in (0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "unable to parse requirement")
	code, _, errOut = c.run("get", "nodes", "-o", "jsonpath={.items[")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "jsonpath")
	code, _, errOut = c.run("get", "nodes", "--sort-by", "{.metadata.nope}")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, ".metadata.nope")

	assert.Equal(t, "NAME   RANK   ZONE\ngw-1   a      <none>\ngw-2   b      <none>\n",
		c.ok("get", "nodes", "-l", "site notin (0)", "--sort-by", ".metadata.labels.rank",
			"-o", "custom-columns=NAME:.metadata.name,RANK:{.metadata.labels.rank},ZONE:.metadata.labels.zone"))
	assert.Equal(t, "gw-1   a\ngw-2   b\n",
		c.ok("get", "nodes", "-l", "site notin (0)", "--sort-by", ".metadata.labels.rank", "--no-headers",
			"-o", "custom-columns=NAME:.metadata.name,RANK:{.metadata.labels.rank}"))
	table := c.ok("get", "nodes", "--no-headers", "--sort-by", "{.metadata.labels.rank}")
	assert.NotContains(t, table, "NAME")
	assert.True(t, strings.HasPrefix(table, "gw-1 "), table)
	code, _, errOut = c.run("get", "nodes", "-o", "custom-columns=NAME")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "expected <header>:<json-path-expr>")
}

// TestCLIEmptyLists: an empty list prints "No resources found" on stderr
// and exits 0, as kubectl does; -o json still prints an empty List.
func TestCLIEmptyLists(t *testing.T) {
	c := startFleet(t, 0)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"get", "nodes"}, "No resources found\n"},
		{[]string{"get", "ds"}, "No resources found in default namespace.\n"},
		{[]string{"get", "ds", "-n", "edge", "-o", "wide"}, "No resources found in edge namespace.\n"},
		{[]string{"get", "cm", "-n", "edge"}, "No resources found in edge namespace.\n"},
		{[]string{"get", "secrets", "-A"}, "No resources found\n"},
		{[]string{"get", "instances", "-n", "edge", "-o", "name"}, "No resources found in edge namespace.\n"},
		{[]string{"get", "sources"}, "No resources found\n"},
		{[]string{"get", "ds", "-l", "app in (x)", "-o", "custom-columns=NAME:.metadata.name"}, "No resources found in default namespace.\n"},
	} {
		code, out, errOut := c.run(tc.args...)
		assert.Equal(t, 0, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Equal(t, tc.msg, errOut, tc.args)
	}
	code, out, errOut := c.run("get", "ds", "-o", "json")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	var l object
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	assert.Equal(t, "List", l["kind"])
	assert.Equal(t, []any{}, l["items"])
}

// TestCLIEventsNamespaces: events -n NS shows the events of NS's objects,
// -A those of every namespace and of nodes.
func TestCLIEventsNamespaces(t *testing.T) {
	c := startFleetWithDaemon(t)
	waitUntil(t, "a node event", func() bool { return strings.Contains(c.ok("events", "-A"), "node/gw-") })
	all := c.ok("events", "-A")
	assert.Contains(t, all, "daemonset/monitoring/exporter")
	mon := c.ok("events", "-n", "monitoring")
	assert.Contains(t, mon, "daemonset/monitoring/exporter")
	assert.NotContains(t, mon, "node/gw-")
	code, out, errOut := c.run("events", "-n", "edge")
	assert.Equal(t, 0, code)
	assert.Empty(t, out)
	assert.Equal(t, "No events found in edge namespace.\n", errOut)
}

// TestCLICompletion: node and daemonset names complete from the API.
func TestCLICompletion(t *testing.T) {
	c := startFleetWithDaemon(t)
	out := c.ok("__complete", "get", "nodes", "")
	for _, n := range []string{"gw-0", "gw-1", "gw-2"} {
		assert.Contains(t, out, n+"\n")
	}
	assert.Contains(t, c.ok("__complete", "describe", "ds", "-n", "monitoring", ""), "exporter\n")
	assert.NotContains(t, c.ok("__complete", "describe", "ds", ""), "exporter", "default namespace has none")
	assert.Contains(t, c.ok("__complete", "cordon", "gw-"), "gw-2\n")
	assert.Contains(t, c.ok("__complete", "get", ""), "daemonsets\n")
}

// TestManifestsDecodeBack: the Nodes that get nodes -o yaml prints are a
// node file that schema.DecodeNodes (explain --node-file) reads back to
// the same nodes, and printed DaemonSets decode to their specs.
func TestManifestsDecodeBack(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printNodes(&buf, outputYAML, goldenNodes(), fixedNow))
	nodes, err := schema.DecodeNodes("nodes.yaml", buf.Bytes())
	require.NoError(t, err)
	require.Len(t, nodes, len(goldenNodes()))
	for i, want := range goldenNodes() {
		got := nodes[i]
		assert.Equal(t, want.Name, got.Name)
		assert.Equal(t, want.Labels, got.Labels)
		assert.Equal(t, want.Taints, got.Taints)
		assert.Equal(t, want.Unschedulable, got.Unschedulable)
		assert.Equal(t, want.Conditions, got.Conditions)
		assert.Equal(t, want.Capacity, got.Capacity)
		assert.Equal(t, want.Info.OS, got.Info.OS)
		assert.Equal(t, want.Info.Arch, got.Info.Arch)
		assert.Equal(t, want.Info.Runtime, got.Info.Runtime)
		assert.Equal(t, want.Info.RuntimeVersion, got.Info.RuntimeVersion)
	}

	buf.Reset()
	dss := goldenDaemonSets()
	for i := range dss { // a valid manifest, as the controller stores them
		spec := &dss[i].Manifest.Spec
		spec.Selector = &schema.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		spec.Template.Metadata.Labels = map[string]string{"app": "x"}
	}
	require.NoError(t, printDaemonSets(&buf, outputYAML, dss, false, fixedNow))
	objs, _, err := schema.Decode("ds.yaml", buf.Bytes())
	require.NoError(t, err)
	require.Len(t, objs, len(dss))
	for i, d := range dss {
		want := d.Manifest
		schema.SetDefaults(&want)
		assert.Equal(t, d.Key(), objs[i].DaemonSet.Key())
		assert.Equal(t, want.Spec, objs[i].DaemonSet.Spec)
	}
}

func TestSortObjects(t *testing.T) {
	nodes := []api.Node{
		{Node: schema.Node{Name: "gw-10", Labels: map[string]string{"rank": "2"}}},
		{Node: schema.Node{Name: "gw-2"}},
		{Node: schema.Node{Name: "gw-1", Labels: map[string]string{"rank": "10"}}},
	}
	names := func(v any) string {
		var out []string
		for _, n := range v.([]api.Node) {
			out = append(out, n.Name)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct{ path, want string }{
		{".metadata.name", "gw-1 gw-2 gw-10"},
		{"{.metadata.labels.rank}", "gw-2 gw-10 gw-1"},
		{"metadata.name", "gw-1 gw-2 gw-10"},
	} {
		v, err := sortObjects(kindNode, slices.Clone(nodes), tc.path)
		require.NoError(t, err, tc.path)
		assert.Equal(t, tc.want, names(v), tc.path)
	}
	_, err := sortObjects(kindNode, nodes, "{.metadata.nope}")
	assert.ErrorContains(t, err, `couldn't find any field with path "{.metadata.nope}"`)
	_, err = sortObjects(kindNode, nodes, "{{.x}}")
	assert.ErrorContains(t, err, "--sort-by")
	v, err := sortObjects(kindNode, []api.Node{}, ".metadata.nope")
	require.NoError(t, err, "an empty list sorts")
	assert.Empty(t, v)
}

// TestCLIConfigRoundTrip: exported ConfigMaps and Secrets (with
// --show-values) apply back unchanged; a Secret exported without values is
// refused rather than emptied.
func TestCLIConfigRoundTrip(t *testing.T) {
	c := startFleet(t, 0)
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte(configsManifest), 0o644))
	c.ok("apply", "-f", path)

	cms := c.ok("get", "cm", "-n", "monitoring", "-o", "yaml")
	assert.Equal(t, "configmap/monitoring/agent-config unchanged\n", c.okIn(cms, "apply", "-f", "-"))
	secret := c.ok("get", "secret", "api-key", "-n", "monitoring", "-o", "json", "--show-values")
	assert.Equal(t, "secret/monitoring/api-key unchanged\n", c.okIn(secret, "apply", "-f", "-"))

	hidden := c.ok("get", "secret", "api-key", "-n", "monitoring", "-o", "yaml")
	code, _, errOut := c.runIn(hidden, "apply", "-f", "-")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--show-values")
	assert.Contains(t, c.ok("get", "secret", "api-key", "-n", "monitoring", "-o", "jsonpath={.status.keys[0].size}"), "11", "the Secret keeps its value")
}
