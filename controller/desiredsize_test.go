package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestDesiredStateTooLargeIsReported: a node that matches so many
// daemonsets that its desired state would not fit in one message (every
// agent refuses a payload over schema.MaxMessageSize) is not sent that
// state, which it could only refuse: it keeps the last one it could take,
// and the controller says why on the node (a Warning event naming the
// size and the limit) and in /metrics, instead of leaving the node's
// generation behind with no error anywhere.
func TestDesiredStateTooLargeIsReported(t *testing.T) {
	tc := startController(t, Config{})
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("crowded", nil))
	tc.applyYAML(t, exporterYAML)
	n.expectDaemonSets("monitoring/exporter")

	var b strings.Builder
	for i := range 1000 {
		name := fmt.Sprintf("d%04d-%s", i, strings.Repeat("x", 240))
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: %s, namespace: monitoring}\n"+
			"spec:\n  selector: {matchLabels: {app: d%d}}\n  template:\n    metadata: {labels: {app: d%d}}\n"+
			"    spec:\n      nodeSelector: {role: gateway}\n      containers: [{name: c, image: busybox:1}]\n", name, i, i)
	}
	tc.applyYAML(t, b.String())

	ctx := context.Background()
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		evs, err := tc.api.Events(ctx, api.EventFilter{Object: nodeObject("crowded"), Limit: 100})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == reasonDesiredTooLarge && e.Type == schema.EventWarning &&
				strings.Contains(e.Message, fmt.Sprint(schema.MaxMessageSize)) && strings.Contains(e.Message, "1001 instances") {
				return nil
			}
		}
		return fmt.Errorf("no %s warning on node/crowded in %v", reasonDesiredTooLarge, evs)
	})
	if got := counterValue(tc.metrics.desiredTooLarge); got < 1 {
		t.Errorf("edgeset_desired_too_large_total = %v, want at least 1", got)
	}
	// The node was never sent what it would refuse (fakeNode fails the
	// test on a desired state it cannot decode) and keeps its last one.
	n.expectDaemonSets("monitoring/exporter")

	// A restarted controller, whose metrics start from zero, reports it
	// again when it republishes.
	tc.stop()
	tc2 := startController(t, Config{DataDir: tc.cfg.DataDir})
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		if got := counterValue(tc2.metrics.desiredTooLarge); got < 1 {
			return fmt.Errorf("after a restart: edgeset_desired_too_large_total = %v", got)
		}
		return nil
	})
}
