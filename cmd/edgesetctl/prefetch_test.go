package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// prefetchingDaemonSet is a daemonset under spec.rollout.prefetch whose
// nodes download its new revision: one done and switched, one
// downloading, one failing, one waiting for an ask, one old agent.
func prefetchingDaemonSet() api.DaemonSet {
	ds, two := goldenDaemonSets()[0], int32(2)
	ds.Namespace, ds.Name, ds.Manifest.APIVersion = "edge", "camera", schema.APIVersionEdgeset
	ds.Manifest.Spec.Rollout = &schema.RolloutPolicy{Prefetch: &schema.PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: &two, TopologyKey: "site"}}
	target, old := ds.CurrentHash, "1f0c3b2a9d8e7f6a5b4c"
	ds.Status.Rollout = &api.RolloutStatus{Strategy: "RollingUpdate", Target: target, Total: 1205, Updated: 1, Waiting: 0,
		WaitingForPrefetch: 1203, MaxUnavailable: 1,
		Prefetch: &api.RolloutPrefetch{Nodes: 1204, Done: 812, Downloading: 2, Unsupported: 1}}
	ds.Instances = []api.Instance{
		{Node: "cam-1", DaemonSet: "edge/camera", Revision: target, Phase: "Running", Ready: true, Online: true},
		{Node: "cam-2", DaemonSet: "edge/camera", Revision: old, Phase: "Running", Ready: true, Online: true,
			Prefetch: &api.InstancePrefetch{Revision: target, BytesDone: 12 << 20, BytesTotal: 40 << 20}},
		{Node: "cam-3", DaemonSet: "edge/camera", Revision: old, Phase: "Running", Ready: true, Online: true,
			Prefetch: &api.InstancePrefetch{Revision: target, BytesDone: 1 << 20, BytesTotal: 40 << 20, Error: "pull registry.local/camera:2: connection reset"}},
		{Node: "cam-4", DaemonSet: "edge/camera", Revision: old, Phase: "Running", Ready: true, Online: true,
			Prefetch: &api.InstancePrefetch{Revision: target, BytesDone: 40 << 20, BytesTotal: 40 << 20, Done: true}},
		{Node: "cam-5", DaemonSet: "edge/camera", Revision: old, Phase: "Running", Ready: true, Online: true},
	}
	return ds
}

func TestPrefetchNote(t *testing.T) {
	ds := prefetchingDaemonSet()
	r := *ds.Status.Rollout
	assert.Equal(t, "; prefetched 812 / 1,204 (2 downloading: 13.0 MiB / 80.0 MiB), 1,203 waiting for their download; "+
		"1 not prefetching (agent without prefetch support)", prefetchNote(r, ds.Instances))
	r.Complete = true
	assert.Empty(t, prefetchNote(r, ds.Instances), "nothing to say once complete")
	r.Complete, r.Prefetch = false, nil
	assert.Empty(t, prefetchNote(r, ds.Instances), "nothing to say without prefetch")
}

func TestGrouped(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		assert.Equal(t, want, grouped(n))
	}
}
