package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestFirstPassWithRetainedFleet: a controller that connects to an
// external broker already holding the fleet's retained state makes its
// first pass within a few seconds. Mochi as the external broker loses the
// first fence marker after such a connection now and then; the
// controller gave up until its next connection and never made a pass
// (found by the HA controller tests: every takeover stalled). It now
// tries the fence again on the same connection.
func TestFirstPassWithRetainedFleet(t *testing.T) {
	brokerDir := t.TempDir()
	b, err := broker.New(broker.Options{Addr: "127.0.0.1:0", DataDir: brokerDir, Logger: testLogger(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	secret, err := credential.LoadOrCreateFleetSecret(brokerDir)
	require.NoError(t, err)
	passwordFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(passwordFile, []byte(credential.ControllerToken(secret)+"\n"), 0o600))
	url := "tcp://" + b.Addr().String()
	for _, name := range []string{"gw-1", "gw-2", "gw-3", "gw-4", "gw-5"} {
		startNode(t, url, secret, gateway(name, nil))
	}
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		if got := b.Stats().Connected; got < 5 {
			return fmt.Errorf("%d nodes connected", got)
		}
		return nil
	})

	for round := range 3 { // a restart on the same store too
		start := time.Now()
		tc := startController(t, Config{BrokerURLs: []string{url}, BrokerPasswordFile: passwordFile, BrokerSettleInterval: -1, DataDir: brokerDir})
		t.Logf("round %d: first pass after %s", round, time.Since(start).Round(time.Millisecond))
		tc.stop()
	}
}
