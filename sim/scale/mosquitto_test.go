package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/sim"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// The Mosquitto benchmark's gate and fleet size.
const (
	envMosquittoGate  = "EDGESET_SCALE_MOSQUITTO"
	envMosquittoNodes = "EDGESET_SCALE_MOSQUITTO_NODES"
)

// TestScaleMosquitto is the fleet scale benchmark with Mosquitto as the
// broker of the controller and every device (EDGESET_SCALE_MOSQUITTO=1;
// EDGESET_SCALE_MOSQUITTO_NODES devices, default 10,000). It logs the
// figures; it asserts only that every phase completes.
func TestScaleMosquitto(t *testing.T) {
	if os.Getenv(envMosquittoGate) != "1" {
		t.Skip("set " + envMosquittoGate + "=1 to run the fleet scale benchmark against Mosquitto")
	}
	nodes := 10000
	if s := os.Getenv(envMosquittoNodes); s != "" {
		var err error
		if nodes, err = strconv.Atoi(s); err != nil || nodes <= 0 {
			t.Fatalf("%s=%q: want a positive number", envMosquittoNodes, s)
		}
	}
	// Mosquitto inherits the limit: one descriptor per device.
	if err := RaiseFDLimit(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]string{credential.ControllerUsername: credential.ControllerToken(secret)}
	for i := range nodes {
		name := fmt.Sprintf("%s%05d", sim.DefaultNamePrefix, i)
		users[name] = credential.NodeToken(secret, name)
	}
	// docs/mosquitto.md: the queue must exceed 3 x nodes plus the largest
	// burst, here a status from every node at once.
	srv := mosquitto.Start(t, mosquitto.Config{Users: users, ControllerUser: credential.ControllerUsername, MaxQueuedMessages: 4 * nodes})
	pwFile := filepath.Join(t.TempDir(), "controller.password")
	if err := os.WriteFile(pwFile, []byte(credential.ControllerToken(secret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envHostBroker, srv.URL())
	t.Setenv(envHostPassword, pwFile)

	res, err := Run(context.Background(), Options{
		Nodes: nodes, HostCommand: []string{os.Args[0], "-test.run=^$"}, DataDir: dir,
		BrokerURL: srv.URL(), Timeout: 5 * time.Minute, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatalf("benchmark: %v\nmosquitto log tail:\n%s", err, tail(srv.Log(), 2000))
	}
	t.Logf("nodes %d (ramp %.2fs, connect p50 %.3fs p99 %.3fs max %.3fs)",
		res.Nodes, res.RampSeconds, res.Fleet.ConnectSeconds.P50, res.Fleet.ConnectSeconds.P99, res.Fleet.ConnectSeconds.Max)
	t.Logf("registered after ramp   %.2fs", res.RegisterSeconds)
	t.Logf("apply -> all running    %.2fs", res.ApplySeconds)
	t.Logf("rollout (maxUnav. 10%%)  %.2fs", res.RolloutSeconds)
	t.Logf("controller live heap    %.2f KiB per node; RSS %.2f KiB per node", res.HeapPerNode()/1024, res.RSSPerNode()/1024)
	t.Logf("rollout MQTT bytes/node %.0f", res.RolloutBytesPerNode)
	// Mosquitto is a third process here: its CPU time is in "outside both".
	t.Log(res.RegisterCPU.Line("register"))
	t.Log(res.ApplyCPU.Line("apply"))
	t.Log(res.RolloutCPU.Line("rollout"))
}

// testWriter logs each progress line.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:max(0, len(p)-1)]))
	return len(p), nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
