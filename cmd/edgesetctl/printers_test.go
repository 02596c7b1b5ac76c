package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// fixedNow is the clock of every golden table.
var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time { t := fixedNow.Add(-d); return &t }

func goldenNodes() []api.Node {
	ready := schema.NodeCondition{Type: schema.NodeReady, Status: schema.ConditionTrue, Since: fixedNow.Add(-3 * time.Hour)}
	return []api.Node{
		{Node: schema.Node{Name: "gw-berlin-1", Labels: map[string]string{"site": "berlin", "role": "gateway"},
			Conditions: []schema.NodeCondition{ready}, Info: schema.NodeInfo{OS: "linux", Arch: "arm64", AgentVersion: "v0.1.0", Runtime: "docker", RuntimeVersion: "20.10.24"}},
			Online: true, LastSeen: ago(5 * time.Second), DesiredGeneration: 4, ObservedGeneration: 4,
			Telemetry: goldenTelemetry(),
			Instances: []api.Instance{{Node: "gw-berlin-1", DaemonSet: "monitoring/node-exporter", Revision: "8232a8846ff7bc935bb3", Phase: "Running", Ready: true, Online: true}},
			Placement: []api.Placement{
				{Node: "gw-berlin-1", DaemonSet: "monitoring/node-exporter", Run: true, KeepRunning: true, Reasons: []string{}},
				{Node: "gw-berlin-1", DaemonSet: "logging/fluentd", Run: false, KeepRunning: false, Reasons: []string{`node selector: label "role" is "gateway", want "collector"`}},
			}},
		{Node: schema.Node{Name: "gw-paris-2", Labels: map[string]string{"site": "paris"}, Unschedulable: true,
			Taints:     []schema.Taint{{Key: schema.TaintNodeUnreachable, Effect: schema.TaintNoExecute}},
			Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionUnknown, Reason: "NodeStatusUnknown"}},
			Info:       schema.NodeInfo{OS: "linux", Arch: "arm", AgentVersion: "v0.1.0"}},
			Online: false, LastSeen: ago(26 * time.Hour), OfflineSince: ago(26 * time.Hour)},
	}
}

func goldenTelemetry() *telemetry.Node {
	temp := 47.5
	return &telemetry.Node{Received: fixedNow.Add(-20 * time.Second), History: make([]telemetry.Point, 12),
		Latest: schema.Telemetry{Load1: 0.42, CPUs: 4, MemoryTotalBytes: 4 << 30, MemoryAvailableBytes: 2684354560, UptimeSeconds: 93784,
			Disks: []schema.DiskUsage{{Name: schema.DiskData, Path: "/var/lib/edgeset", SizeBytes: 32 << 30, FreeBytes: 20 << 30},
				{Name: schema.DiskDocker, Path: "/var/lib/docker", SizeBytes: 32 << 30, FreeBytes: 20 << 30}},
			TemperatureCelsius: &temp,
			Instances:          []schema.InstanceUsage{{DaemonSet: "monitoring/node-exporter", CPUPercent: 3.2, MemoryBytes: 18 << 20}}}}
}

func goldenDaemonSets() []api.DaemonSet {
	mu := schema.FromString("10%")
	return []api.DaemonSet{{
		Namespace: "monitoring", Name: "node-exporter", Generation: 3, CurrentRevision: 2, CurrentHash: "8232a8846ff7bc935bb3",
		CreatedAt: fixedNow.Add(-72 * time.Hour),
		Manifest: schema.DaemonSet{TypeMeta: schema.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			Metadata: schema.ObjectMeta{Name: "node-exporter", Namespace: "monitoring", Labels: map[string]string{"app": "node-exporter"}},
			Spec: schema.DaemonSetSpec{MinReadySeconds: 5,
				UpdateStrategy: schema.DaemonSetUpdateStrategy{Type: schema.RollingUpdateStrategy, RollingUpdate: &schema.RollingUpdateDaemonSet{MaxUnavailable: &mu}},
				Template: schema.PodTemplateSpec{Spec: schema.PodSpec{NodeSelector: map[string]string{"role": "gateway"},
					Containers: []schema.Container{{Name: "node-exporter", Image: "prom/node-exporter:v1.8.2"}}}}}},
		Status: api.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 10, CurrentNumberScheduled: 10, NumberReady: 8,
			NumberAvailable: 8, NumberUnavailable: 2, UpdatedNumberScheduled: 7, NodesOffline: 1,
			Rollout: &api.RolloutStatus{Strategy: "RollingUpdate", Target: "8232a8846ff7bc935bb3", Total: 10, Updated: 7, Updating: 1, Waiting: 1, Offline: 1, MaxUnavailable: 1}},
		Instances: []api.Instance{
			{Node: "gw-berlin-1", DaemonSet: "monitoring/node-exporter", Revision: "8232a8846ff7bc935bb3", Phase: "Running", Ready: true, Online: true},
			{Node: "gw-paris-2", DaemonSet: "monitoring/node-exporter", Revision: "1f0c3b2a9d8e7f6a5b4c", Phase: "CrashLoopBackOff", Restarts: 4, Message: "exit code 1", Online: false},
		},
	}}
}

// windowedDaemonSet is a daemonset with a per-site budget and maintenance
// windows, some of its nodes waiting for theirs.
func windowedDaemonSet() api.DaemonSet {
	ds, one := goldenDaemonSets()[0], schema.FromInt(1)
	ds.Namespace, ds.Name, ds.Manifest.APIVersion = "edge", "gateway", schema.APIVersionEdgeset
	ds.Manifest.Spec.Rollout = &schema.RolloutPolicy{
		MaxUnavailablePerTopology: &schema.TopologyBudget{TopologyKey: "site", MaxUnavailable: &one},
		MaintenanceWindows: []schema.MaintenanceWindow{
			{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin", NodeSelector: map[string]string{"region": "eu"}},
			{Schedule: "0 3 * * 6", Duration: "90m"},
		},
	}
	next := fixedNow.Add(5 * time.Hour)
	ds.Status.Rollout = &api.RolloutStatus{Strategy: "RollingUpdate", Target: ds.CurrentHash, Total: 10, Updated: 4, Updating: 1,
		Waiting: 1, WaitingForWindow: 4, NextWindow: &next, MaxUnavailable: 1}
	ds.Instances = nil
	return ds
}

// lockedDaemonSet is a daemonset whose template opts into the update
// lock, two of its nodes held by their lock (one stale, one deferred), a
// third overridden.
func lockedDaemonSet() api.DaemonSet {
	ds := goldenDaemonSets()[0]
	ds.Namespace, ds.Name, ds.Manifest.APIVersion = "edge", "flasher", schema.APIVersionEdgeset
	ds.Manifest.Spec.Template.Metadata.Annotations = map[string]string{schema.UpdateLockAnnotation: "true"}
	stale := int32(1800)
	ds.Manifest.Spec.Rollout = &schema.RolloutPolicy{UpdateLockStaleAfterSeconds: &stale}
	ds.Status.Rollout = &api.RolloutStatus{Strategy: "RollingUpdate", Target: ds.CurrentHash, Total: 4, Updated: 1, Updating: 1,
		HeldByLock: 2, StaleLocks: 1, MaxUnavailable: 1}
	old := "1f0c3b2a9d8e7f6a5b4c"
	ds.Instances = []api.Instance{
		{Node: "gw-1", DaemonSet: "edge/flasher", Revision: ds.CurrentHash, Phase: "Running", Ready: true, Online: true},
		{Node: "gw-2", DaemonSet: "edge/flasher", Revision: old, Phase: "Running", Ready: true, Online: true,
			UpdateLock: &api.UpdateLock{HeldSince: fixedNow.Add(-3 * time.Hour), Stale: true}},
		{Node: "gw-3", DaemonSet: "edge/flasher", Revision: old, Phase: "Running", Ready: true, Online: true,
			UpdateLock: &api.UpdateLock{HeldSince: fixedNow.Add(-5 * time.Minute), Deferred: true}},
		{Node: "gw-4", DaemonSet: "edge/flasher", Revision: ds.CurrentHash, Phase: "Pending", Online: true, Message: "waiting for revision",
			UpdateLock: &api.UpdateLock{HeldSince: fixedNow.Add(-4 * time.Hour), Stale: true, Overridden: true}},
	}
	return ds
}

func goldenEvents() []api.Event {
	return []api.Event{
		{Seq: 7, Time: fixedNow.Add(-90 * time.Second), Type: "Normal", Reason: "Scheduled", Object: "daemonset/monitoring/node-exporter", Message: "node gw-berlin-1: revision 8232a8846ff7bc935bb3"},
		{Seq: 9, Time: fixedNow.Add(-30 * time.Second), Type: "Warning", Reason: "InstanceFailed", Object: "daemonset/monitoring/node-exporter", Message: "node gw-paris-2: CrashLoopBackOff: exit code 1"},
		{Seq: 12, Time: fixedNow.Add(-10 * time.Minute), Type: "Warning", Reason: "ProbeFailed", Object: "node/gw-paris-2", Message: "readiness probe failed",
			Count: 14, LastTime: ptrTime(fixedNow.Add(-20 * time.Second)), Source: "gw-paris-2"},
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

func TestGoldenTables(t *testing.T) {
	t.Parallel()
	ds := goldenDaemonSets()
	cases := []struct {
		name  string
		print func(w *bytes.Buffer) error
	}{
		{"get-nodes", func(w *bytes.Buffer) error { return printNodes(w, outputTable, goldenNodes(), fixedNow) }},
		{"get-nodes-wide", func(w *bytes.Buffer) error { return printNodes(w, outputWide, goldenNodes(), fixedNow) }},
		{"get-nodes-name", func(w *bytes.Buffer) error { return printNodes(w, outputName, goldenNodes(), fixedNow) }},
		{"get-daemonsets", func(w *bytes.Buffer) error { return printDaemonSets(w, outputTable, ds, false, fixedNow) }},
		{"get-daemonsets-all-wide", func(w *bytes.Buffer) error { return printDaemonSets(w, outputWide, ds, true, fixedNow) }},
		{"get-instances", func(w *bytes.Buffer) error { return printInstances(w, outputTable, ds[0].Instances) }},
		{"get-instances-wide", func(w *bytes.Buffer) error { return printInstances(w, outputWide, ds[0].Instances) }},
		{"get-instances-json", func(w *bytes.Buffer) error { return printInstances(w, outputJSON, ds[0].Instances) }},
		{"get-daemonsets-yaml", func(w *bytes.Buffer) error { return printDaemonSets(w, outputYAML, ds, false, fixedNow) }},
		{"get-nodes-yaml", func(w *bytes.Buffer) error { return printNodes(w, outputYAML, goldenNodes(), fixedNow) }},
		{"get-daemonset-json", func(w *bytes.Buffer) error {
			return printManifests(w, printer{format: outputJSON}, manifestObjects(kindDaemonSet, ds[:1]), true)
		}},
		{"get-nodes-custom-columns", func(w *bytes.Buffer) error {
			p, err := parsePrinter("custom-columns=NAME:.metadata.name,OS:.status.nodeInfo.operatingSystem,READY:{.status.conditions[?(@.type==\"Ready\")].status},TAINTS:.spec.taints[*].key")
			require.NoError(t, err)
			return printManifests(w, p, manifestObjects(kindNode, goldenNodes()), false)
		}},
		{"describe-node", func(w *bytes.Buffer) error { writeNode(w, goldenNodes()[0], goldenEvents()[:1], fixedNow); return nil }},
		{"describe-node-offline", func(w *bytes.Buffer) error { writeNode(w, goldenNodes()[1], nil, fixedNow); return nil }},
		{"describe-daemonset", func(w *bytes.Buffer) error { writeDaemonSet(w, ds[0], goldenEvents(), fixedNow); return nil }},
		{"rollout-history", func(w *bytes.Buffer) error {
			return printHistory(w, []api.Revision{
				{Number: 1, Hash: "1f0c3b2a9d8e7f6a5b4c", CreatedAt: fixedNow.Add(-72 * time.Hour), Nodes: 3, Images: []string{"prom/node-exporter:v1.8.1"}},
				{Number: 2, Hash: "8232a8846ff7bc935bb3", ChangeCause: "bump to v1.8.2", CreatedAt: fixedNow.Add(-time.Hour), Current: true, Nodes: 7, Images: []string{"prom/node-exporter:v1.8.2"},
					Pins: []schema.ImagePin{{Image: "prom/node-exporter:v1.8.2", Digest: "sha256:1b5e0c2d9a" + strings.Repeat("0", 54), Config: "sha256:" + strings.Repeat("c", 64)}}},
			}, fixedNow)
		}},
		{"describe-daemonset-windows", func(w *bytes.Buffer) error { writeDaemonSet(w, windowedDaemonSet(), nil, fixedNow); return nil }},
		{"rollout-progress-windows", func(w *bytes.Buffer) error {
			(&lineProgress{key: "edge/gateway", out: w}).update(windowedDaemonSet())
			return nil
		}},
		{"describe-daemonset-prefetch", func(w *bytes.Buffer) error { writeDaemonSet(w, prefetchingDaemonSet(), nil, fixedNow); return nil }},
		{"rollout-progress-prefetch", func(w *bytes.Buffer) error {
			(&lineProgress{key: "edge/camera", out: w}).update(prefetchingDaemonSet())
			return nil
		}},
		{"describe-daemonset-locks", func(w *bytes.Buffer) error { writeDaemonSet(w, lockedDaemonSet(), nil, fixedNow); return nil }},
		{"rollout-progress-locks", func(w *bytes.Buffer) error {
			(&lineProgress{key: "edge/flasher", out: w}).update(lockedDaemonSet())
			return nil
		}},
		{"get-instances-locks", func(w *bytes.Buffer) error { return printInstances(w, outputTable, lockedDaemonSet().Instances) }},
		{"get-instances-locks-wide", func(w *bytes.Buffer) error { return printInstances(w, outputWide, lockedDaemonSet().Instances) }},
		{"rollout-progress", func(w *bytes.Buffer) error {
			(&lineProgress{key: "monitoring/node-exporter", out: w}).update(ds[0])
			return nil
		}},
		{"explain", func(w *bytes.Buffer) error {
			return printExplain(w, []placement.Result{
				{Node: "gw-berlin-1", DaemonSet: "monitoring/node-exporter", Run: true, KeepRunning: true, Reasons: []string{}},
				{Node: "sensor-7", DaemonSet: "monitoring/node-exporter", Reasons: []string{`node selector: label "role" is "sensor", want "gateway"`}},
			})
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

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	require.Equal(t, string(want), string(got))
}

func TestSelector(t *testing.T) {
	labels := map[string]string{"site": "berlin", "role": "gateway"}
	cases := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"site=berlin", true},
		{"site==berlin", true},
		{"site!=berlin", false},
		{"site=paris", false},
		{"role", true},
		{"!role", false},
		{"!zone", true},
		{"site=berlin,role=gateway", true},
		{"site=berlin,role=sensor", false},
		{"site in (berlin,paris),role", true},
		{"site notin (berlin)", false},
		{"zone notin (a),!zone", true},
	}
	for _, tc := range cases {
		sel, err := parseSelector(tc.sel)
		require.NoError(t, err, tc.sel)
		require.Equal(t, tc.want, sel.Matches(labels), tc.sel)
	}
	_, err := parseSelector("site in (a,b")
	require.ErrorContains(t, err, `selector "site in (a,b": unable to parse requirement`)
	require.ErrorAs(t, err, new(usageError))
	_, err = parseSelector("a,,b")
	require.Error(t, err)
}

// TestExplainCommand runs explain on the Kubernetes documentation's fluentd
// DaemonSet against a mixed node export, in both output formats.
func TestExplainCommand(t *testing.T) {
	for _, tc := range []struct{ name, format string }{{"explain-fluentd", ""}, {"explain-fluentd-json", "json"}} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"explain", "-f", "../../schema/testdata/manifests/fluentd-elasticsearch.yaml",
				"--node-file", "testdata/in/nodes-mixed.yaml"}
			if tc.format != "" {
				args = append(args, "-o", tc.format)
			}
			var out, errb bytes.Buffer
			code := run(args, bytes.NewReader(nil), &out, &errb)
			require.Equal(t, 0, code, errb.String())
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), out.Bytes())
		})
	}
	var out, errb bytes.Buffer
	code := run([]string{"explain", "-f", "../../schema/testdata/manifests/fluentd-elasticsearch.yaml",
		"--node-file", "testdata/in/nodes-mixed.yaml", "--node", "nope"}, bytes.NewReader(nil), &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, errb.String(), `node "nope" is not in testdata/in/nodes-mixed.yaml`)
}

// TestTableKeepsMessagesOnTheirRow: a termination message taken from a
// container's last log lines (FallbackToLogsOnError) holds line breaks; in
// a table it must stay in its cell, not start a row of its own.
func TestTableKeepsMessagesOnTheirRow(t *testing.T) {
	var buf bytes.Buffer
	tb := newTable(&buf, "NODE", "PHASE", "MESSAGE")
	tb.row("gw-1", "CrashLoopBackOff", "exit code 3: app: exiting with 3\napp: stderr exiting\r\nwith\t3\n")
	tb.row("gw-2", "Running", "<none>")
	require.NoError(t, tb.flush())
	require.Equal(t, "NODE   PHASE              MESSAGE\n"+
		`gw-1   CrashLoopBackOff   exit code 3: app: exiting with 3\napp: stderr exiting\nwith 3`+"\n"+
		"gw-2   Running            <none>\n", buf.String())
}
