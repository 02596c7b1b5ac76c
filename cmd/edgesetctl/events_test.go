package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
)

// TestGoldenLiveTables covers the tables of events and the live explain.
func TestGoldenLiveTables(t *testing.T) {
	t.Parallel()
	nodes := goldenNodes()
	nodes[1].Placement = []api.Placement{{Node: "gw-paris-2", DaemonSet: "monitoring/node-exporter", KeepRunning: true,
		Reasons: []string{"node is unschedulable (cordoned)"}}}
	nodes[1].Instances = []api.Instance{{Node: "gw-paris-2", DaemonSet: "monitoring/node-exporter", Phase: "Running"}}
	live := []liveResult{
		liveResultOf(nodes[0], "monitoring/node-exporter"),
		liveResultOf(nodes[1], "monitoring/node-exporter"),
		{Node: "gw-rome-3", DaemonSet: "monitoring/node-exporter", Online: true, Run: true, Reasons: []string{}},
		{Node: "gw-rome-4", DaemonSet: "monitoring/node-exporter", Online: true, Run: true, Phase: "ImagePullBackOff",
			Message: "pull prom/node-exporter:v1.8.2: no route to host", Reasons: []string{}},
		{Node: "sensor-7", DaemonSet: "monitoring/node-exporter", Online: true,
			Reasons: []string{`node selector: label "kubernetes.io/os" is missing, want "linux"`}},
		{Node: "sensor-8", DaemonSet: "monitoring/node-exporter", Online: true, KeepRunning: true,
			Reasons: []string{"taint edgeset.io/maintenance=true:NoSchedule is not tolerated"}},
	}
	cases := []struct {
		name  string
		print func(w *bytes.Buffer) error
	}{
		{"events", func(w *bytes.Buffer) error { return printEvents(w, goldenEvents(), true, fixedNow) }},
		{"events-empty", func(w *bytes.Buffer) error { return printEvents(w, nil, true, fixedNow) }},
		{"events-stream-json", func(w *bytes.Buffer) error { return printEventStream(w, outputJSON, goldenEvents(), true, fixedNow) }},
		{"explain-live", func(w *bytes.Buffer) error { return printLiveExplain(w, live) }},
		{"explain-live-json", func(w *bytes.Buffer) error { return printData(w, outputJSON, live) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tc.print(&buf))
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), buf.Bytes())
		})
	}
}

func TestEventObject(t *testing.T) {
	cases := []struct{ arg, want, err string }{
		{"", "", ""},
		{"node/gw-1", "node/gw-1", ""},
		{"no/gw-1", "node/gw-1", ""},
		{"ds/node-exporter", "daemonset/monitoring/node-exporter", ""},
		{"daemonset/kube-system/fluentd", "daemonset/kube-system/fluentd", ""},
		{"cm/fluent-bit", "configmap/monitoring/fluent-bit", ""},
		{"configmap/logging/fluent-bit", "configmap/logging/fluent-bit", ""},
		{"secret/api-key", "secret/monitoring/api-key", ""},
		{"secrets/edge/api-key", "secret/edge/api-key", ""},
		{"node", "", "want node/NAME"},
		{"instances/x", "", "kept for nodes, daemonsets, configmaps and secrets"},
		{"widget/x", "", "unknown resource type"},
	}
	for _, tc := range cases {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := eventObject(tc.arg, "monitoring")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDaemonSetKey(t *testing.T) {
	cases := []struct {
		args      []string
		want, err string
	}{
		{[]string{"daemonset", "node-exporter"}, "monitoring/node-exporter", ""},
		{[]string{"ds/node-exporter"}, "monitoring/node-exporter", ""},
		{[]string{"ds/logging/fluentd"}, "logging/fluentd", ""},
		{[]string{"ds"}, "", "name is missing"},
		{[]string{"ds/a", "b"}, "", "name given twice"},
		{[]string{"node", "gw-1"}, "", "only daemonsets"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := daemonSetKey(tc.args, "monitoring")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a polling reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWatchObjects checks that a watch prints the first state and then only
// changes, and that it ends cleanly with its context.
func TestWatchObjects(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	polls := 0
	fetch := func(context.Context) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		polls++
		return []string{"a", map[bool]string{true: "b", false: "c"}[polls < 5]}, nil
	}
	show := func(w io.Writer, v any) error {
		_, err := io.WriteString(w, strings.Join(v.([]string), ",")+"\n")
		return err
	}
	var out, errOut syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watchObjects(ctx, &streams{out: &out, err: &errOut, watchEvery: time.Millisecond}, outputTable, fetch, show)
	}()
	waitUntil(t, "the change", func() bool { return strings.Contains(out.String(), "a,c") })
	waitUntil(t, "more polls", func() bool { mu.Lock(); defer mu.Unlock(); return polls > 10 })
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, "a,b\n\na,c\n", out.String())
	assert.Empty(t, errOut.String())
}

// TestLiveCommands runs events and the live explain against a controller
// with three fake agents.
func TestLiveCommands(t *testing.T) {
	c := startFleet(t, 3)
	waitUntil(t, "3 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 3
	})
	c.ok("apply", "-f", manifest(t, "exporter:1"))
	c.ok("label", "node", "gw-2", "role=sensor", "--overwrite")
	waitUntil(t, "2 ready instances", func() bool {
		out := c.ok("explain", "daemonset", "exporter", "-n", "monitoring")
		return strings.Count(out, "runs, ready") == 2
	})
	out := c.ok("explain", "ds/monitoring/exporter", "--node", "gw-2")
	assert.Contains(t, out, "gw-2")
	assert.Contains(t, out, `label "role" is "sensor"`)
	assert.NotContains(t, out, "gw-0")

	code, _, errOut := c.run("explain", "ds", "nope", "-n", "monitoring")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not found")
	code, _, errOut = c.run("explain", "ds", "exporter", "-f", "x.yaml")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "not both")

	out = c.ok("events", "--for", "ds/exporter", "-n", "monitoring")
	assert.Contains(t, out, "daemonset/monitoring/exporter")
	assert.Contains(t, c.ok("events"), "AGE")
	assert.Contains(t, c.ok("events", "-o", "json"), `"seq"`)
}
