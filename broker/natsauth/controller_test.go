package natsauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
)

// TestControllerServesCallout: the controller's nats-auth keys make it the
// cluster's auth callout, with no responder of its own started by the
// test: the controller logs itself in through it, a node with its token
// registers on another server, and a node with a wrong token does not.
// The node announces itself while the controller subscribes on another
// server: without the re-read after the connection settled
// (broker-settle-interval) the announcement is now and then lost between
// the two servers and the node never registers.
func TestControllerServesCallout(t *testing.T) {
	cluster := natstest.StartCluster(t, 3)
	dataDir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dataDir)
	require.NoError(t, err)
	files := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(files, name)
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
		return path
	}
	seed, err := cluster.Issuer.Seed()
	require.NoError(t, err)
	ctl, err := controller.New(controller.Config{
		DataDir:                dataDir,
		BrokerURLs:             cluster.MQTTURLs()[:1],
		APIAddr:                "127.0.0.1:0",
		NATSAuthURLs:           cluster.Clients,
		NATSAuthUser:           natstest.AuthUser,
		NATSAuthPasswordFile:   write("auth.password", cluster.AuthPassword),
		NATSAuthIssuerSeedFile: write("issuer.seed", string(seed)),
		NATSAuthAccount:        natstest.Account,
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	runUntilCleanup(t, ctl.Run)
	cluster.WaitForResponder(t)
	client := api.NewClient("http://"+ctl.APIAddr().String(), ctl.Token(), nil)

	runAgent(t, cluster.MQTTURLs()[1], "gw-2", credential.NodeToken(secret, "gw-2"), nil)
	runAgent(t, cluster.MQTTURLs()[1], "intruder", "not-its-token", nil)
	checkfor.Eventually(t, 4*waitFor, 50*time.Millisecond, func() error {
		n, err := client.GetNode(context.Background(), "gw-2")
		if err != nil {
			return fmt.Errorf("node not registered: %w", err)
		}
		if !n.Online {
			return fmt.Errorf("node not online")
		}
		return nil
	})
	_, err = client.GetNode(context.Background(), "intruder")
	require.Error(t, err, "a node with a wrong token registered")
}
