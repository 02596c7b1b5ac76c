package main

import (
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/ha"
	"github.com/edgeset/edgeset/internal/cliconfig"
)

// TestHAKeysLoad: the HA keys come from flags, the environment and the
// file like every other, with their documented defaults.
func TestHAKeysLoad(t *testing.T) {
	t.Setenv("EDGESET_CONTROLLER_ID", "ctl-2")
	cmd := newRootCmd(io.Discard)
	require.NoError(t, cmd.Flags().Parse([]string{"--store", "etcd", "--etcd-endpoints", "http://e1:2379,http://e2:2379"}))
	v := cliconfig.New(nil)
	cliconfig.Bind(v, cmd.Flags())
	path := t.TempDir() + "/controller.yaml"
	require.NoError(t, os.WriteFile(path, []byte("leader-lease-ttl: 6s\nbroker-url: tcp://mqtt:1883\n"), 0o600))
	v.Set("config", path)
	fc, _, err := loadFileConfig(v)
	require.NoError(t, err)
	assert.Equal(t, ha.Config{Store: ha.StoreEtcd, EtcdEndpoints: []string{"http://e1:2379", "http://e2:2379"},
		EtcdPrefix: ha.DefaultPrefix, ControllerID: "ctl-2", LeaderLeaseTTL: 6 * time.Second}, fc.HA)

	fc.Config.ApplyDefaults()
	fc.HA.ApplyDefaults(fc.Config)
	require.NoError(t, fc.HA.Validate(fc.Config))
	assert.Equal(t, "http://127.0.0.1:8080", fc.HA.AdvertiseURL, "derived from api-addr")
}

// TestHARefusals: the controller refuses to start on etcd with its
// embedded broker, or on bbolt with etcd keys it would ignore, naming the
// keys; it opens nothing first.
func TestHARefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "embedded broker", args: []string{"--store", "etcd", "--etcd-endpoints", "http://e1:2379"}, want: "broker-url: required with store etcd"},
		{name: "no endpoints", args: []string{"--store", "etcd", "--broker-url", "tcp://mqtt:1883"}, want: "etcd-endpoints: required with store etcd"},
		{name: "wildcard api", args: []string{"--store", "etcd", "--etcd-endpoints", "http://e1:2379", "--broker-url", "tcp://mqtt:1883", "--api-addr", "0.0.0.0:8080"},
			want: "advertise-url: required: api-addr 0.0.0.0:8080 listens on every address"},
		{name: "bbolt with endpoints", args: []string{"--etcd-endpoints", "http://e1:2379"}, want: "etcd-endpoints: set, but store is bbolt"},
		{name: "unknown store", args: []string{"--store", "sqlite"}, want: `store: "sqlite": want bbolt or etcd`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := newRootCmd(io.Discard)
			cmd.SetArgs(append(tc.args, "--data-dir", dir))
			err := cmd.Execute()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			entries, _ := os.ReadDir(dir)
			assert.Empty(t, entries, "nothing created in the data directory")
		})
	}
}
