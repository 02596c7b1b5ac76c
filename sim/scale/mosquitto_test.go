package scale

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/sim"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// The test binary runs a controller host instead of the tests when
// envHostBroker is set: against that broker, with the password file in
// envHostPassword, on the data directory given as its last argument.
const (
	envGate         = "EDGESET_SCALE_MOSQUITTO"
	envNodes        = "EDGESET_SCALE_MOSQUITTO_NODES"
	envHostBroker   = "EDGESET_SCALE_HOST_BROKER_URL"
	envHostPassword = "EDGESET_SCALE_HOST_PASSWORD_FILE"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envHostBroker); url != "" {
		os.Exit(runHost(url))
	}
	os.Exit(m.Run())
}

// runHost serves Host until its stdin closes (the benchmark is done).
func runHost(brokerURL string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	opts := HostOptions{BrokerURL: brokerURL, BrokerPasswordFile: os.Getenv(envHostPassword)}
	if err := Host(ctx, os.Args[len(os.Args)-1], opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "controller host:", err)
		return 1
	}
	return 0
}

// TestScaleMosquitto is the fleet scale benchmark with Mosquitto as the
// broker of the controller and every device (EDGESET_SCALE_MOSQUITTO=1;
// EDGESET_SCALE_MOSQUITTO_NODES devices, default 10,000). It logs the
// figures; it asserts only that every phase completes.
func TestScaleMosquitto(t *testing.T) {
	if os.Getenv(envGate) != "1" {
		t.Skip("set " + envGate + "=1 to run the fleet scale benchmark against Mosquitto")
	}
	nodes := 10000
	if s := os.Getenv(envNodes); s != "" {
		var err error
		if nodes, err = strconv.Atoi(s); err != nil || nodes <= 0 {
			t.Fatalf("%s=%q: want a positive number", envNodes, s)
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
