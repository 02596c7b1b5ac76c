package controller

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// announce hands the controller node's status, and its presence when
// online, as the broker would.
func announce(t *testing.T, tc *testController, st schema.NodeStatus, online bool) {
	t.Helper()
	st.SchemaVersion = schema.WireVersion
	status, err := schema.Encode(st)
	require.NoError(t, err)
	tc.handleMessage(schema.NodeTopic(st.Node, schema.TopicStatus), status)
	if online {
		p, err := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: st.Node, Online: true, Session: 1})
		require.NoError(t, err)
		tc.handleMessage(schema.NodeTopic(st.Node, schema.TopicOnline), p)
	}
}

// TestMetricsFleetSeries: /metrics counts nodes by condition and by site
// (ready, not ready, offline), gives every daemonset the counts its API
// status has and one rollout phase, follows an operator's pause, and with
// metrics-per-node says of each node whether it is online.
func TestMetricsFleetSeries(t *testing.T) {
	tc := startController(t, Config{SiteLabel: "site", MetricsPerNode: true,
		newTransport: countingTransportOf(func(mqttclient.Message) {})})
	announce(t, tc, gateway("a", map[string]string{"site": "north"}), true)
	announce(t, tc, gateway("b", map[string]string{"site": "north"}), false)
	notReady := gateway("c", map[string]string{"site": "south"})
	notReady.Conditions = []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionFalse}}
	announce(t, tc, notReady, true)
	announce(t, tc, gateway("d", nil), true)
	tc.applyYAML(t, exporterYAML)

	reg := tc.metrics.reg
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := metricValue(t, reg, "edgeset_nodes_by_site", "site", "north", "state", siteReady); got != 1 {
			return fmt.Errorf("north ready: %v", got)
		}
		return nil
	})
	for _, c := range []struct {
		site, state string
		want        float64
	}{{"north", siteReady, 1}, {"north", siteOffline, 1}, {"south", siteNotReady, 1}, {"", siteReady, 1}, {"south", siteReady, 0}} {
		assert.Equal(t, c.want, metricValue(t, reg, "edgeset_nodes_by_site", "site", c.site, "state", c.state), "site %q %s", c.site, c.state)
	}
	assert.Equal(t, 3.0, metricValue(t, reg, "edgeset_nodes_by_condition", "condition", schema.NodeReady, "status", schema.ConditionTrue),
		"a, d and b (offline within its grace) report Ready")
	assert.Equal(t, 1.0, metricValue(t, reg, "edgeset_nodes_by_condition", "condition", schema.NodeReady, "status", schema.ConditionFalse))

	labels := []string{"namespace", "monitoring", "daemonset", "exporter"}
	// The apply returns before the pass that places the daemonset: wait
	// for its status, then compare the series with it. Nothing reports
	// (the transport only counts), so the status stays as decided.
	var st api.DaemonSetStatus
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		ds, err := tc.GetDaemonSet(context.Background(), exporter)
		if err != nil {
			return err
		}
		if st = ds.Status; st.DesiredNumberScheduled == 0 || st.Rollout == nil {
			return fmt.Errorf("daemonset not placed yet: %+v", st)
		}
		return nil
	})
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		for name, want := range map[string]int{
			"desired_number_scheduled": st.DesiredNumberScheduled, "current_number_scheduled": st.CurrentNumberScheduled,
			"number_ready": st.NumberReady, "number_available": st.NumberAvailable, "number_unavailable": st.NumberUnavailable,
			"updated_number_scheduled": st.UpdatedNumberScheduled, "nodes_offline": st.NodesOffline, "number_misscheduled": st.NumberMisscheduled,
		} {
			if got := metricValue(t, reg, "edgeset_daemonset_status_"+name, labels...); got != float64(want) {
				return fmt.Errorf("%s: series %v, status %d", name, got, want)
			}
		}
		return nil
	})
	assertOnePhase(t, reg, labels, rolloutProgressing)
	assert.Positive(t, metricValue(t, reg, "edgeset_daemonset_rollout_last_progress_timestamp_seconds", labels...))

	_, err := tc.Rollout(context.Background(), exporter, api.RolloutRequest{Action: api.RolloutPause})
	require.NoError(t, err)
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := metricValue(t, reg, "edgeset_daemonset_rollout_paused", labels...); got != 1 {
			return fmt.Errorf("paused: %v", got)
		}
		return nil
	})
	assertOnePhase(t, reg, labels, rolloutPaused)

	assert.Equal(t, 1.0, metricValue(t, reg, "edgeset_node_online", "node", "a"))
	assert.Equal(t, 0.0, metricValue(t, reg, "edgeset_node_online", "node", "b"))
	assert.Equal(t, 1.0, metricValue(t, reg, "edgeset_node_condition", "node", "c", "condition", schema.NodeReady, "status", schema.ConditionFalse))
	assert.Equal(t, 0.0, metricValue(t, reg, "edgeset_node_series_truncated"))
}

// assertOnePhase: exactly the phase want of the rollout phases is 1.
func assertOnePhase(t *testing.T, reg prometheus.Gatherer, labels []string, want string) {
	t.Helper()
	for _, phase := range rolloutPhases {
		v := metricValue(t, reg, "edgeset_daemonset_rollout_phase", append(labels, "phase", phase)...)
		assert.Equal(t, boolGauge(phase == want), v, "phase %s", phase)
	}
}

// TestMetricsSitesBounded: past maxMetricSites distinct sites, nodes count
// under "_other", and no per-node series exist unless asked for.
func TestMetricsSitesBounded(t *testing.T) {
	tc := startController(t, Config{SiteLabel: "site", newTransport: countingTransportOf(func(mqttclient.Message) {})})
	n := maxMetricSites + 20
	for i := range n {
		announce(t, tc, gateway(fmt.Sprintf("n%03d", i), map[string]string{"site": fmt.Sprintf("s%03d", i)}), true)
	}
	families, err := tc.metrics.reg.Gather()
	require.NoError(t, err)
	sites, total := map[string]bool{}, 0.0
	for _, f := range families {
		switch f.GetName() {
		case "edgeset_nodes_by_site":
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "site" {
						sites[l.GetValue()] = true
					}
				}
				total += m.GetGauge().GetValue()
			}
		case "edgeset_node_online", "edgeset_node_condition":
			t.Errorf("%s without metrics-per-node", f.GetName())
		}
	}
	assert.Len(t, sites, maxMetricSites+1, "256 sites and _other")
	assert.True(t, sites[otherSite])
	assert.Equal(t, float64(n), total, "every node counted once")
	assert.Equal(t, 20.0, metricValue(t, tc.metrics.reg, "edgeset_nodes_by_site", "site", otherSite, "state", siteReady))
}

// TestAlertRulesUseRealSeries: every edgeset series the example alert rules
// of docs/operations.md name is one the controller exports, and promtool,
// where installed, accepts the rules.
func TestAlertRulesUseRealSeries(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "#### Alert rules")
	require.GreaterOrEqual(t, start, 0, "docs/operations.md has its alert rules")
	open := strings.Index(text[start:], "```yaml\n")
	require.GreaterOrEqual(t, open, 0)
	rules := text[start+open+len("```yaml\n"):]
	rules = rules[:strings.Index(rules, "```")]

	tc := startController(t, Config{newTransport: countingTransportOf(func(mqttclient.Message) {})})
	announce(t, tc, gateway("a", nil), true)
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, "  rollout: {progressDeadlineSeconds: 600}\n"))
	families, err := tc.metrics.reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
	}
	named := regexp.MustCompile(`edgeset_[a-z_]+`).FindAllString(rules, -1)
	require.NotEmpty(t, named)
	for _, name := range named {
		assert.True(t, exported[name], "the rules name %s, which the controller does not export", name)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: the rules' syntax is not checked")
		return
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	require.NoError(t, os.WriteFile(path, []byte(rules), 0o600))
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
}
