package main

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/cliconfig"
)

// TestBrokerURLList: broker-url takes a list as a comma-separated flag or
// environment variable, or as a YAML list.
func TestBrokerURLList(t *testing.T) {
	want := []string{"tcp://a:1883", "tcp://b:1883"}
	cases := []struct {
		name string
		args []string
		env  string
		file string
	}{
		{name: "flag", args: []string{"--broker-url", "tcp://a:1883,tcp://b:1883"}},
		{name: "environment", env: "tcp://a:1883,tcp://b:1883"},
		{name: "yaml list", file: "broker-url: [tcp://a:1883, tcp://b:1883]\n"},
		{name: "yaml string", file: "broker-url: tcp://a:1883,tcp://b:1883\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("EDGESET_BROKER_URL", tc.env)
			}
			cmd := newRootCmd(io.Discard)
			require.NoError(t, cmd.Flags().Parse(tc.args))
			v := cliconfig.New(nil)
			cliconfig.Bind(v, cmd.Flags())
			if tc.file != "" {
				path := t.TempDir() + "/controller.yaml"
				require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
				v.Set("config", path)
			}
			cfg, _, err := loadConfig(v)
			require.NoError(t, err)
			require.Equal(t, want, cfg.BrokerURLs)
			require.False(t, cfg.Embedded())
			cfg.ApplyDefaults()
			require.NoError(t, cfg.Validate())
		})
	}
}
