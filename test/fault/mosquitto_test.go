package fault

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// mosquittoBurst is the largest burst of messages to the controller a
// scenario expects beyond the retained state: docs/mosquitto.md sizes
// max_queued_messages above 3 x nodes plus the largest burst.
const mosquittoBurst = 1000

// startControllerOnMosquitto creates the fleet secret in a fresh data
// directory, starts Mosquitto with the controller's token and the tokens of
// nodes agents (named by nodeName) as passwords, then runs the controller
// subprocess against it. Mosquitto stops after the controller and agents.
func startControllerOnMosquitto(t *testing.T, grace time.Duration, nodes int) (*controllerProc, *mosquitto.Server) {
	dir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	require.NoError(t, err)
	users := map[string]string{credential.ControllerUsername: credential.ControllerToken(secret)}
	for i := range nodes {
		users[nodeName(i)] = credential.NodeToken(secret, nodeName(i))
	}
	srv := mosquitto.Start(t, mosquitto.Config{
		Users:             users,
		ControllerUser:    credential.ControllerUsername,
		MaxQueuedMessages: 3*nodes + mosquittoBurst,
	})
	pwFile := filepath.Join(t.TempDir(), "controller.password")
	require.NoError(t, os.WriteFile(pwFile, []byte(credential.ControllerToken(secret)+"\n"), 0o600))
	p := &controllerProc{t: t, dir: dir, mqttAddr: freeAddr(t), apiAddr: freeAddr(t), grace: grace,
		secret: secret, extBrokerURL: srv.URL(), extPasswordFile: pwFile}
	p.start()
	t.Cleanup(p.kill)
	return p, srv
}

// TestMosquittoRestartDuringRollout: the controller and the agents use an
// external Mosquitto, which is restarted twice (SIGTERM, same port and
// persistence) during a rolling update with maxUnavailable 20%. The
// invariants hold throughout and the fleet converges to the new revision.
func TestMosquittoRestartDuringRollout(t *testing.T) {
	n := fleetSize(t)
	ctl, srv := startControllerOnMosquitto(t, grace, n)
	f := startFleet(t, ctl, n, agentOptions{startLatency: 300 * time.Millisecond})
	ctl.apply(manifest("exporter:1", "20%", "0", ""))
	ds := f.converged(func(ds api.DaemonSet) string { return ds.CurrentHash })
	s := &scenario{t: t, ctl: ctl, f: f, v1: ds.CurrentHash, chk: startChecker(t, f)}
	s.chk.forward(s.v1)

	v2 := s.rollTo(manifest("exporter:2", "20%", "0", ""), percent(20, n), false)
	for i := range 2 {
		time.Sleep(600 * time.Millisecond)
		if ds, err := ctl.daemonSet(); err == nil && ds.Status.Rollout != nil {
			r := ds.Status.Rollout
			t.Logf("restart %d: %d of %d updated, %d updating, complete %v", i+1, r.Updated, r.Total, r.Updating, r.Complete)
		}
		srv.Restart()
	}
	ds, err := ctl.daemonSet()
	require.NoError(t, err)
	assert.Equal(t, v2, ds.CurrentHash, "the revision survives broker restarts")
	s.f.converged(is(v2))
}
