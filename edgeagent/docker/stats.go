package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

var _ edgeagent.UsageReader = (*Runtime)(nil)

// maxStatsBytes bounds one container's statistics document.
const maxStatsBytes = 1 << 20

// Usage returns one sample of a container's cumulative CPU time and its
// memory in use, from the engine's statistics without the second sample
// the engine otherwise waits a second for (the agent computes CPU usage
// between its own samples).
func (r *Runtime) Usage(ctx context.Context, id string) (edgeagent.ContainerUsage, error) {
	res, err := r.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return edgeagent.ContainerUsage{}, containerErr("stats of", id, err)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, maxStatsBytes)).Decode(&st); err != nil {
		return edgeagent.ContainerUsage{}, fmt.Errorf("stats of container %s: %w", id, err)
	}
	return usageOf(&st), nil
}

// usageOf reduces the engine's statistics to what telemetry reports. The
// memory in use is the cgroup's usage less its inactive file cache, as
// `docker stats` shows it (cgroup v2 names it inactive_file, v1
// total_inactive_file).
func usageOf(st *container.StatsResponse) edgeagent.ContainerUsage {
	mem := st.MemoryStats.Usage
	cache := st.MemoryStats.Stats["inactive_file"]
	if v, ok := st.MemoryStats.Stats["total_inactive_file"]; ok {
		cache = v
	}
	if cache < mem {
		mem -= cache
	}
	return edgeagent.ContainerUsage{
		CPUTotalNanos:  st.CPUStats.CPUUsage.TotalUsage,
		SystemCPUNanos: st.CPUStats.SystemUsage,
		OnlineCPUs:     int(st.CPUStats.OnlineCPUs),
		MemoryBytes:    int64(mem),
	}
}

// RootDir is the engine's root directory (DockerRootDir), whose
// filesystem holds images and containers.
func (r *Runtime) RootDir(ctx context.Context) (string, error) {
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("docker engine info at %s: %w", r.cli.DaemonHost(), err)
	}
	return info.Info.DockerRootDir, nil
}
