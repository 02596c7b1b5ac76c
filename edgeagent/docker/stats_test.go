package docker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestUsageAndTelemetryOnTheEngine: the engine's statistics of a
// container that holds 32 MiB and keeps a CPU busy give the Telemeter its
// memory and, between two samples, its CPU; the engine's root directory
// is reported as a filesystem.
func TestUsageAndTelemetryOnTheEngine(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	spec := e.spec("spin", "spin", "32")
	spec.Labels[edgeagent.LabelDaemonSet] = "monitoring/spinner"
	id := e.create(t, spec)
	if err := e.rt.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	e.waitLog(t, id, "app: spinning with 32 MiB")

	u, err := e.rt.Usage(ctx, id)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	if u.MemoryBytes < 32<<20 || u.CPUTotalNanos == 0 || u.SystemCPUNanos == 0 || u.OnlineCPUs < 1 {
		t.Fatalf("Usage = %+v, want at least 32 MiB and CPU counters", u)
	}
	root, err := e.rt.RootDir(ctx)
	if err != nil || root == "" {
		t.Fatalf("RootDir = %q, %v", root, err)
	}

	tm := edgeagent.NewTelemeter(e.node, t.TempDir(), e.rt)
	tm.Measure(ctx) // the first sample has no CPU figure
	checkfor.Eventually(t, 30*time.Second, time.Second, func() error {
		m := tm.Measure(ctx)
		for _, in := range m.Instances {
			if in.DaemonSet == "monitoring/spinner" && in.CPUPercent >= 20 && in.MemoryBytes >= 32<<20 {
				hasDocker := false
				for _, d := range m.Disks {
					hasDocker = hasDocker || d.Name == "docker" && d.Path == root && d.SizeBytes > 0
				}
				if !hasDocker {
					return fmt.Errorf("disks %+v: no engine filesystem at %s", m.Disks, root)
				}
				return nil
			}
		}
		return fmt.Errorf("instances %+v: want monitoring/spinner at >= 20%% of a CPU and >= 32 MiB", m.Instances)
	})
}
