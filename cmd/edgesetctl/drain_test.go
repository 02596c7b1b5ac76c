package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/controller/api"
)

// TestDrainTimeoutDuringPoll: when --timeout passes while drain is asking
// the controller (not between two polls), it still names what still runs.
// A timeout that is a multiple of the poll interval (5s, 1m) ends in the
// request half the time; the error was then "GET /nodes/N: timed out ...",
// without the instances.
func TestDrainTimeoutDuringPoll(t *testing.T) {
	node := api.Node{Online: true, DesiredGeneration: 2, ObservedGeneration: 2,
		Instances: []api.Instance{{Node: "n1", DaemonSet: "ns/a", Phase: "Running", Ready: true}},
		Placement: []api.Placement{{Node: "n1", DaemonSet: "ns/a", Run: false, KeepRunning: false}}}
	node.Name = "n1"
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && gets.Add(1) > 2 {
			<-r.Context().Done() // the third GET (the second poll) outlasts the timeout
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(node)
	}))
	defer srv.Close()
	code, _, errOut := cli{t: t, server: srv.URL, token: "x"}.run("drain", "n1", "--timeout", "300ms", "--interval", "10ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "timed out after 300ms waiting for node n1's evicted instances to stop")
	assert.Contains(t, errOut, "still running on node n1: ns/a (the drain stays in effect)")
}

// TestRolloutStatusTimeoutDuringPoll: rollout status whose --timeout
// passes during a poll says the rollout is not complete, as when it passes
// between two polls (not "GET /daemonsets/...: context deadline exceeded").
func TestRolloutStatusTimeoutDuringPoll(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gets.Add(1) > 1 {
			<-r.Context().Done() // the second poll outlasts the timeout
			return
		}
		w.Header().Set("Content-Type", "application/json")
		ds := api.DaemonSet{}
		ds.Name, ds.Namespace = "a", "ns"
		_ = json.NewEncoder(w).Encode(ds)
	}))
	defer srv.Close()
	code, _, errOut := cli{t: t, server: srv.URL, token: "x"}.run("rollout", "status", "ds", "a", "-n", "ns", "--timeout", "300ms", "--interval", "10ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "timed out after 300ms waiting for rollout status (--timeout): rollout of ns/a not complete")
	assert.NotContains(t, errOut, "GET /daemonsets")
}

// TestDrainRightAfterUncordon: a drain that starts before the controller
// has put a daemon back into the node's desired state (uncordon, then
// drain at once) still waits for it: what placement ran on the node before
// the drain counts, not only the desired instances. The node here is
// offline and has acted on nothing since, so drain must not say
// "drained"; it used to, at once.
func TestDrainRightAfterUncordon(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node := api.Node{DesiredGeneration: 6, ObservedGeneration: 1,
			Placement: []api.Placement{{Node: "n1", DaemonSet: "ns/a", Run: false}}}
		if r.Method == http.MethodGet && gets.Add(1) == 1 {
			// Before the drain: placement runs ns/a there, but the desired
			// state does not hold it yet.
			node.DesiredGeneration = 5
			node.Placement[0].Run = true
		}
		node.Name = "n1"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(node)
	}))
	defer srv.Close()
	code, out, errOut := cli{t: t, server: srv.URL, token: "x"}.run("drain", "n1", "--timeout", "300ms", "--interval", "10ms")
	assert.Equal(t, 1, code, out)
	assert.NotContains(t, out, "node/n1 drained")
	assert.Contains(t, errOut, "still running on node n1: ns/a (the drain stays in effect)")
}
