package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
)

func lockedManifest(t *testing.T, image string) string {
	path := filepath.Join(t.TempDir(), "flasher.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: flasher, namespace: edge}
spec:
  selector: {matchLabels: {app: flasher}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  rollout: {updateLockStaleAfterSeconds: 3600}
  template:
    metadata:
      labels: {app: flasher}
      annotations: {edgeset.io/update-lock: "true"}
    spec:
      containers:
      - {name: flasher, image: "%s"}
`, image)), 0o644))
	return path
}

// TestCLIUpdateLock drives the update lock end to end through edgesetctl,
// the controller and two agents (fake engines, real data dirs): a
// daemon's lock taken two hours ago is shown held and stale by get
// instances, describe and rollout status, the other node is updated, a
// --force naming a node without a stale lock is refused, the one that
// names the locked node overrides it, the rollout completes, and the
// audit log and the events say so.
func TestCLIUpdateLock(t *testing.T) {
	c, _ := startFleetWith(t, 0, fake.New)
	secret, err := credential.LoadOrCreateFleetSecret(c.dataDir)
	require.NoError(t, err)
	dirs := map[string]string{}
	for _, name := range []string{"gw-0", "gw-1"} {
		rt := fake.New()
		rt.AddImage("flasher:1", "flasher:2")
		dirs[name] = t.TempDir()
		startAgent(t, c.mqttURL, secret, name, rt, func(o *edgeagent.NodeOptions) {
			o.Agent.Ephemeral, o.Agent.DataDir, o.Agent.UpdateLockPoll = false, dirs[name], 50*time.Millisecond
		})
	}
	c.ok("apply", "-f", lockedManifest(t, "flasher:1"))
	c.ok("rollout", "status", "ds", "flasher", "-n", "edge", "--interval", "100ms")
	ds, err := api.NewClient(c.server, c.token, http.DefaultClient).GetDaemonSet(context.Background(), "edge/flasher")
	require.NoError(t, err)

	lock := filepath.Join(dirs["gw-0"], "pods", edgeagent.PodUID("gw-0", "edge/flasher", ds.CurrentHash), "update-lock", "updates.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	since := time.Now().Add(-2 * time.Hour).Truncate(time.Second).UTC()
	require.NoError(t, os.Chtimes(lock, since, since))
	held := "held by update lock since " + since.Format(time.RFC3339)
	waitUntil(t, "gw-0's lock shown", func() bool {
		return strings.Contains(c.ok("get", "instances", "-n", "edge", "-o", "wide"), held)
	})
	assert.Contains(t, c.ok("get", "instances", "-n", "edge"), "Running (locked)")

	c.ok("apply", "-f", lockedManifest(t, "flasher:2"))
	var describe string
	waitUntil(t, "gw-1 updated, gw-0 held and stale", func() bool {
		describe = c.ok("describe", "ds", "flasher", "-n", "edge")
		return strings.Contains(describe, "1/2 updated") && strings.Contains(describe, "1 held by an update lock (gw-0 since "+since.Format(time.RFC3339)+", stale), 1 stale")
	})
	assert.Contains(t, describe, "Update lock:   held while /run/edgeset/updates.lock exists; stale after 1h0m0s")
	assert.Contains(t, describe, held+" (stale)")
	code, out, _ := c.run("rollout", "status", "ds", "flasher", "-n", "edge", "--timeout", "300ms", "--interval", "100ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "1 held by an update lock (gw-0 since "+since.Format(time.RFC3339)+", stale), 1 stale: `edgesetctl rollout resume ds flasher -n edge --force` overrides them")

	code, _, errOut := c.run("rollout", "resume", "ds", "flasher", "-n", "edge", "--force", "--node", "gw-1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `node "gw-1" holds no stale update lock of daemonset edge/flasher`)
	code, _, errOut = c.run("rollout", "resume", "ds", "flasher", "-n", "edge", "--node", "gw-0")
	assert.Equal(t, 2, code, "a usage error")
	assert.Contains(t, errOut, "--node selects the lock --force overrides")

	out = c.ok("rollout", "resume", "ds", "flasher", "-n", "edge", "--force", "--node", "gw-0")
	assert.Equal(t, "daemonset/edge/flasher resumed; update locks overridden on gw-0 (held since "+since.Format(time.RFC3339)+")\n", out)
	c.ok("rollout", "status", "ds", "flasher", "-n", "edge", "--interval", "100ms")
	_, err = os.Stat(lock)
	assert.True(t, os.IsNotExist(err), "the old instance and its lock are gone: %v", err)

	assert.Contains(t, c.ok("audit"), "/api/v1/daemonsets/edge/flasher/rollout/force?node=gw-0")
	events := c.ok("events", "--for", "ds/flasher", "-n", "edge")
	assert.Contains(t, events, "RolloutUpdateLockStale")
	assert.Contains(t, events, "RolloutUpdateLocksOverridden")
	nodeEvents := c.ok("events", "--for", "node/gw-0")
	assert.Contains(t, nodeEvents, "UpdateLockOverridden")
}

func TestHeldNote(t *testing.T) {
	since := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	ds := func(held, stale int, ins ...api.Instance) api.DaemonSet {
		return api.DaemonSet{Namespace: "edge", Name: "flasher", Instances: ins,
			Status: api.DaemonSetStatus{Rollout: &api.RolloutStatus{HeldByLock: held, StaleLocks: stale}}}
	}
	locked := func(node string, l api.UpdateLock) api.Instance { return api.Instance{Node: node, UpdateLock: &l} }
	tests := []struct {
		name string
		ds   api.DaemonSet
		want string
	}{
		{"none", ds(0, 0), ""},
		{"held", ds(1, 0, locked("gw-1", api.UpdateLock{HeldSince: since})), "; 1 held by an update lock (gw-1 since 2026-11-29T09:00:00Z)"},
		{"stale only (its window is closed)", ds(0, 1, locked("gw-1", api.UpdateLock{HeldSince: since, Stale: true})),
			"; 1 stale: `edgesetctl rollout resume ds flasher -n edge --force` overrides them"},
		{"more than three, the overridden left out", ds(5, 0, locked("a", api.UpdateLock{HeldSince: since}), locked("b", api.UpdateLock{HeldSince: since}),
			locked("c", api.UpdateLock{HeldSince: since, Overridden: true}), locked("d", api.UpdateLock{HeldSince: since}),
			locked("e", api.UpdateLock{HeldSince: since}), locked("f", api.UpdateLock{HeldSince: since})),
			"; 5 held by an update lock (a since 2026-11-29T09:00:00Z; b since 2026-11-29T09:00:00Z; d since 2026-11-29T09:00:00Z; 2 more)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, heldNote(tc.ds)) })
	}
}
