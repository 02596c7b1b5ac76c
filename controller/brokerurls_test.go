package controller

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/credential"
)

// TestBrokerURLValidation: broker-url takes one URL or a list; a bad entry
// of a list is named by its index.
func TestBrokerURLValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" for valid
	}{
		{name: "embedded", cfg: Config{}},
		{name: "one", cfg: Config{BrokerURLs: []string{"tcp://mqtt:1883"}}},
		{name: "shorthand", cfg: Config{BrokerURL: "tcp://mqtt:1883"}},
		{name: "list", cfg: Config{BrokerURLs: []string{"ssl://mqtt-1:8883", " ssl://mqtt-2:8883"}}},
		{name: "bad one", cfg: Config{BrokerURLs: []string{"mqtt"}}, wantErr: `broker-url: "mqtt" is not a URL`},
		{name: "bad entry", cfg: Config{BrokerURLs: []string{"tcp://a:1883", ""}}, wantErr: `broker-url[1]: "" is not a URL`},
		{name: "both", cfg: Config{BrokerURL: "tcp://a", BrokerURLs: []string{"tcp://b"}}, wantErr: "set one"},
		{name: "too many", cfg: Config{BrokerURLs: make([]string, 33)}, wantErr: "broker-url: 33 URLs, at most 32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ApplyDefaults()
			err := tc.cfg.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	assert.True(t, (&Config{BrokerURLs: []string{}}).Embedded())
	assert.False(t, (&Config{BrokerURL: "tcp://a"}).Embedded())
}

// TestExternalBrokerList: of a list whose first node is dead, the
// controller connects to the live one, and Version names it.
func TestExternalBrokerList(t *testing.T) {
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "tcp://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	live := "tcp://" + b.Addr().String()

	tc := startController(t, Config{BrokerURLs: []string{dead, live}, BrokerPasswordFile: passwordFile})
	n := startNode(t, live, secret, gateway("gw", nil))
	tc.applyYAML(t, exporterYAML)
	n.expectDaemonSets("monitoring/exporter")
	assert.Equal(t, live+" (of "+dead+","+live+")", tc.Version(context.Background()).Broker)
}
