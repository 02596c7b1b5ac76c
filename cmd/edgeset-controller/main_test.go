package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/internal/cliconfig"
)

// TestDocumentedConfigLoads: configs/controller.yaml, the reference of
// every key, loads through the same path as --config, with every value its
// documented default; every flag is documented there; and
// docs/configuration.md reproduces the file.
func TestDocumentedConfigLoads(t *testing.T) {
	cmd := newRootCmd(io.Discard)
	v := cliconfig.New(nil)
	require.NoError(t, v.BindPFlags(cmd.Flags()))
	v.Set("config", "../../configs/controller.yaml")
	cfg, source, err := loadConfig(v)
	require.NoError(t, err)
	assert.Equal(t, "../../configs/controller.yaml", source)

	defaults := controller.Config{}
	defaults.ApplyDefaults()
	cfg.ApplyDefaults()
	assert.Equal(t, defaults, cfg, "the documented values are the defaults")
	require.NoError(t, cfg.Validate())

	file, err := os.ReadFile("../../configs/controller.yaml")
	require.NoError(t, err)
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" && f.Name != "help" && f.Name != "version" {
			assert.Contains(t, string(file), "\n"+f.Name+":", "flag --%s is not documented in configs/controller.yaml", f.Name)
		}
	})
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(doc), strings.TrimSpace(string(file))),
		"docs/configuration.md must reproduce configs/controller.yaml")
}

func TestUnknownConfigKeyIsNamed(t *testing.T) {
	path := t.TempDir() + "/bad.yaml"
	require.NoError(t, os.WriteFile(path, []byte("data-dir: x\nmqtt-adress: 127.0.0.1:1\n"), 0o600))
	v := cliconfig.New(nil)
	require.NoError(t, v.BindPFlags(newRootCmd(io.Discard).Flags()))
	v.Set("config", path)
	_, _, err := loadConfig(v)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mqtt-adress")
	assert.Contains(t, err.Error(), path)
}

// TestBareNumberDurationIsRefused: a duration written without its unit
// ("mqtt-connect-timeout: 10", meaning seconds) decoded as nanoseconds, a
// connect timeout that refused every device, with no error; it is refused
// naming the key and the form wanted. Durations with a unit, and the
// flags' own, still load.
func TestBareNumberDurationIsRefused(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"data-dir: x\nmqtt-connect-timeout: 10\n", "mqtt-connect-timeout"},
		{"data-dir: x\napi-read-timeout: 2.5\n", "api-read-timeout"},
	} {
		path := t.TempDir() + "/bad.yaml"
		require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
		v := cliconfig.New(nil)
		require.NoError(t, v.BindPFlags(newRootCmd(io.Discard).Flags()))
		v.Set("config", path)
		_, _, err := loadConfig(v)
		require.Error(t, err, tc.file)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), `such as "10s"`)
	}
	path := t.TempDir() + "/good.yaml"
	require.NoError(t, os.WriteFile(path, []byte("data-dir: x\nmqtt-connect-timeout: 10s\n"), 0o600))
	v := cliconfig.New(nil)
	require.NoError(t, v.BindPFlags(newRootCmd(io.Discard).Flags()))
	v.Set("config", path)
	cfg, _, err := loadConfig(v)
	require.NoError(t, err)
	assert.Equal(t, "10s", cfg.MQTTConnectTimeout.String())
}
