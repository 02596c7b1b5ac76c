package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent/fake"
)

// startFleetPulling runs a controller and n agents whose fake engine
// cannot pull the image "exporter:broken".
func startFleetPulling(t *testing.T, n int) cli {
	c, _ := startFleetWith(t, n, func() *fake.Runtime {
		rt := fake.New()
		rt.ImagePullFailure = func(image string) error {
			if image == "exporter:broken" {
				return errors.New("manifest unknown")
			}
			return nil
		}
		return rt
	})
	return c
}

// guardedManifest writes an edgeset.io/v1 exporter that rolls back on its
// first failed instance (progress deadline one second).
func guardedManifest(t *testing.T, image string) string {
	path := filepath.Join(t.TempDir(), "exporter.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  rollout: {progressDeadlineSeconds: 1, failureThreshold: 1, autoRollback: true}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - {name: exporter, image: "%s"}
`, image)), 0o644))
	return path
}

// TestCLIAfterAutomaticRollback: after an automatic rollback, get shows the
// image that runs, rollout status exits 1 with the reason, diff of the
// rejected manifest shows the difference and exits 1, re-applying it says
// it was rolled back, and rollout retry rolls it out again.
func TestCLIAfterAutomaticRollback(t *testing.T) {
	c := startFleetPulling(t, 2)
	waitUntil(t, "2 nodes", func() bool {
		_, out, _ := c.run("get", "nodes", "-o", "name")
		return strings.Count(out, "node/") == 2
	})
	c.ok("apply", "-f", guardedManifest(t, "exporter:1"))
	c.ok("rollout", "status", "ds", "exporter", "-n", "monitoring", "--interval", "100ms")

	bad := guardedManifest(t, "exporter:broken")
	assert.Equal(t, "daemonset/monitoring/exporter configured\n", c.ok("apply", "-f", bad))
	code, out, errOut := c.run("rollout", "status", "ds", "exporter", "-n", "monitoring", "--interval", "100ms", "--timeout", "20s")
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, errOut, "revision 2 (")
	assert.Contains(t, errOut, "rolled back automatically: 1 of 1 updated instances failed (failureThreshold 1)")
	assert.Contains(t, errOut, "rollout retry daemonset exporter -n monitoring")
	assert.NotContains(t, errOut, ": \n", "the reason is not empty")

	waitUntil(t, "the rollback to complete", func() bool {
		code, _, errOut := c.run("rollout", "status", "ds", "exporter", "-n", "monitoring", "--interval", "100ms", "--timeout", "5s")
		return code == 1 && strings.Contains(errOut, "rollback complete")
	})
	assert.Contains(t, c.ok("describe", "ds", "exporter", "-n", "monitoring"), "(1 of 1 updated instances failed (failureThreshold 1))")
	wide := c.ok("get", "ds", "-n", "monitoring", "-o", "wide")
	assert.Contains(t, wide, "exporter:1")
	assert.NotContains(t, wide, "exporter:broken")

	code, out, errOut = c.run("diff", "-f", bad)
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, "daemonset/monitoring/exporter rolled back")
	assert.Contains(t, out, `- spec.template.spec.containers[0].image: "exporter:1"`)
	assert.Contains(t, out, `+ spec.template.spec.containers[0].image: "exporter:broken"`)

	out = c.ok("apply", "-f", bad)
	assert.Contains(t, out, "daemonset/monitoring/exporter rolled back\n")
	assert.Contains(t, out, "`edgesetctl rollout retry daemonset exporter -n monitoring`")
	assert.Contains(t, c.ok("get", "ds", "-n", "monitoring", "-o", "wide"), "exporter:1")

	assert.Contains(t, c.ok("rollout", "retry", "ds", "exporter", "-n", "monitoring"), "daemonset/monitoring/exporter retried")
	assert.Contains(t, c.ok("get", "ds", "-n", "monitoring", "-o", "wide"), "exporter:broken")
}
