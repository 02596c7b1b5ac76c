package ui

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/controller/api"
)

// TestSampleCountsNodesWaitingForPrefetch: the dashboard's rollout counts
// add up to the total while nodes wait for their download.
func TestSampleCountsNodesWaitingForPrefetch(t *testing.T) {
	ds := api.DaemonSet{}
	ds.Status.Rollout = &api.RolloutStatus{Total: 10, Updated: 3, Updating: 1, Waiting: 1, WaitingForWindow: 2, WaitingForPrefetch: 3,
		Prefetch: &api.RolloutPrefetch{Nodes: 8, Done: 4, Downloading: 2}}
	s := sampleOf(&ds)
	assert.Equal(t, 6, s.Waiting)
	assert.Equal(t, s.Total, s.Updated+s.Updating+s.Waiting+s.Offline+s.Failed)
}

// TestDaemonSetPageShowsPrefetch: the DaemonSet page says how far the
// downloads of a rollout under prefetch are.
func TestDaemonSetPageShowsPrefetch(t *testing.T) {
	u := newTestUI(t, Options{})
	u.fake.mu.Lock()
	ro := u.fake.dss[0].Status.Rollout
	ro.WaitingForPrefetch, ro.Prefetch = 5, &api.RolloutPrefetch{Nodes: 8, Done: 3, Downloading: 2, Unsupported: 1}
	u.fake.mu.Unlock()
	resp := u.do(http.MethodGet, "/ui/daemonsets/monitoring/exporter", nil, u.signIn(), nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, readBody(t, resp), "prefetched 3 / 8, 2 downloading, 5 waiting for their download, 1 not prefetching")
}
