package fault

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/etcdtest"
)

// TestHAControllersOnNATSCluster (make test-cluster-ha): the whole scale-out
// topology. Two HA controllers as processes on etcd, their broker a
// cluster of three nats-server processes whose auth callout the leader
// serves, EDGESET_FAULT_NODES agents given all three members. During a
// rolling update (maxUnavailable 20%) one member is killed with SIGKILL
// and restarted on its store, then the leader controller is killed with
// SIGKILL: the standby leads within haTakeover, the invariants hold
// throughout (one instance per daemonset per device, the budget), and the
// fleet converges to the new revision.
func TestHAControllersOnNATSCluster(t *testing.T) {
	if os.Getenv(envCluster) != "1" {
		t.Skip("a broker-cluster scenario (builds nats-server and edgeset-controller, five processes): make test-cluster-ha, or " + envCluster + "=1")
	}
	n := fleetSize(t)
	cluster := startNATSProcs(t, 3)
	secret, err := credential.LoadOrCreateFleetSecret(t.TempDir())
	require.NoError(t, err)
	pw, seed := calloutFiles(t, cluster)
	brokers := strings.Join(cluster.MQTTURLs(), ",")
	env := newHAEnvOn(t, brokers, secret, "--nats-auth-url", strings.Join(cluster.Clients, ","),
		"--nats-auth-password-file", pw, "--nats-auth-issuer-seed-file", seed)
	c1, c2 := env.controller("c1", true), env.controller("c2", false)
	c1.start()
	waitLeader(t, 30*time.Second, c1)
	c2.start()
	lead, standbys := waitLeader(t, 30*time.Second, c1, c2)
	standby := standbys[0]
	token := string(etcdtest.Get(t, env.etcd.Client(t), "/edgeset/secrets/api-token"))
	require.NotEmpty(t, token)

	ctl := &controllerProc{t: t, secret: secret, extBrokerURL: brokers, api: api.NewClient(standby.url(), token, nil)}
	f := startFleet(t, ctl, n, natsAgents(agentOptions{startLatency: 300 * time.Millisecond}))
	ctl.apply(manifest("exporter:1", "20%", "0", ""))
	ds := f.converged(func(ds api.DaemonSet) string { return ds.CurrentHash })
	s := &scenario{t: t, ctl: ctl, f: f, v1: ds.CurrentHash, chk: startChecker(t, f)}
	s.chk.forward(s.v1)

	v2 := s.rollTo(manifest("exporter:2", "20%", "0", ""), percent(20, n), false)
	progress := func(what string) {
		if ds, err := ctl.daemonSet(); err == nil && ds.Status.Rollout != nil {
			r := ds.Status.Rollout
			t.Logf("%s: %d of %d updated, %d updating", what, r.Updated, r.Total, r.Updating)
		}
	}
	checkfor.Eventually(t, f.bound(), 50*time.Millisecond, func() error {
		ds, err := ctl.daemonSet()
		if err != nil {
			return err
		}
		if r := ds.Status.Rollout; ds.CurrentHash != v2 || r == nil || r.Updated+r.Updating == 0 || r.Complete {
			return fmt.Errorf("rollout of %s not under way: %+v", v2, ds.Status.Rollout)
		}
		return nil
	})
	progress("killing broker member s1")
	cluster.Procs[1].Kill()
	time.Sleep(2 * time.Second)
	cluster.Procs[1].Start()
	progress("broker member s1 restarted")
	time.Sleep(time.Second)

	progress("killing leader " + lead.id)
	killed := time.Now()
	lead.kill()
	checkfor.Eventually(t, haTakeover+20*time.Second, 50*time.Millisecond, func() error {
		if !standby.leading() {
			return fmt.Errorf("%s does not lead yet", standby.id)
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("%s took over %s after the SIGKILL of %s", standby.id, took.Round(time.Millisecond), lead.id)
	assert.LessOrEqual(t, took, haTakeover, "the standby takes over within %s", haTakeover)
	lead.start() // back as a standby
	ctl.api = api.NewClient(standby.url(), token, nil)
	progress("the standby leads")

	ds = f.converged(is(v2))
	assert.Equal(t, v2, ds.CurrentHash, "the rollout completes under the new leader, across the member's restart")
}
