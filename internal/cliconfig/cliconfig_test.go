package cliconfig

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

type testConfig struct {
	ConfigFile string        `mapstructure:"config"`
	DataDir    string        `mapstructure:"data-dir"`
	Timeout    time.Duration `mapstructure:"timeout"`
	Labels     []string      `mapstructure:"labels"`
}

// newViper binds the flags of testConfig, parsed from args.
func newViper(t *testing.T, args ...string) *viper.Viper {
	t.Helper()
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.String("config", "", "")
	f.String("data-dir", "./data", "")
	f.Duration("timeout", time.Second, "")
	f.StringSlice("labels", nil, "")
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	v := New(map[string]string{"timeout": "EDGESET_TEST_TIMEOUT"})
	Bind(v, f)
	return v
}

// TestEnvNames: a key is read from EDGESET_ and its name with dashes as
// underscores, unless New gave it a variable of its own; then the default
// variable is not read.
func TestEnvNames(t *testing.T) {
	t.Setenv("EDGESET_DATA_DIR", "from-env")
	t.Setenv("EDGESET_TIMEOUT", "7s")
	var cfg testConfig
	if _, err := Load(newViper(t), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "from-env" || cfg.Timeout != time.Second {
		t.Errorf("data-dir %q, timeout %s; want from-env (EDGESET_DATA_DIR) and the 1s default (EDGESET_TIMEOUT is not timeout's variable)", cfg.DataDir, cfg.Timeout)
	}
	t.Setenv("EDGESET_TEST_TIMEOUT", "9s")
	if _, err := Load(newViper(t), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != 9*time.Second {
		t.Errorf("timeout %s, want 9s from EDGESET_TEST_TIMEOUT", cfg.Timeout)
	}
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadPrecedence: flag over environment over config file over default.
func TestLoadPrecedence(t *testing.T) {
	path := writeConfig(t, "data-dir: from-file\ntimeout: 5s\nlabels: [a, b]\n")
	tests := []struct {
		name    string
		args    []string
		env     string // EDGESET_DATA_DIR
		dataDir string
	}{
		{"file", []string{"--config", path}, "", "from-file"},
		{"environment over file", []string{"--config", path}, "from-env", "from-env"},
		{"flag over environment", []string{"--config", path, "--data-dir", "from-flag"}, "from-env", "from-flag"},
		{"default without a file", nil, "", "./data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(EnvPrefix+"_DATA_DIR", tc.env)
			}
			var cfg testConfig
			source, err := Load(newViper(t, tc.args...), &cfg)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.DataDir != tc.dataDir {
				t.Errorf("data-dir = %q, want %q", cfg.DataDir, tc.dataDir)
			}
			wantSource := FromFlagsAndEnv
			if len(tc.args) > 0 {
				wantSource = path
			}
			if source != wantSource {
				t.Errorf("source = %q, want %q", source, wantSource)
			}
		})
	}
}

func TestLoadErrorsNameKeyAndSource(t *testing.T) {
	tests := []struct {
		name, file string
		opts       []viper.DecoderConfigOption
		want       []string
	}{
		{"unknown key", "data-dir: x\ndata-dri: y\n", nil, []string{"data-dri", "config.yaml"}},
		{"bare number duration, strict", "timeout: 10\n", []viper.DecoderConfigOption{StrictDurations}, []string{"timeout", `such as "10s"`, "config.yaml"}},
		{"not YAML", "data-dir: [\n", nil, []string{"read config file", "config.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg testConfig
			_, err := Load(newViper(t, "--config", writeConfig(t, tc.file)), &cfg, tc.opts...)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestStrictDurationsKeepsDefaults: with StrictDurations, durations with a
// unit and comma-separated lists decode as with viper's defaults.
func TestStrictDurationsKeepsDefaults(t *testing.T) {
	t.Setenv(EnvPrefix+"_LABELS", "x,y")
	var cfg testConfig
	if _, err := Load(newViper(t, "--config", writeConfig(t, "timeout: 1m\n")), &cfg, StrictDurations); err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != time.Minute || strings.Join(cfg.Labels, "|") != "x|y" {
		t.Fatalf("timeout %s, labels %q; want 1m0s and [x y]", cfg.Timeout, cfg.Labels)
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(slog.LevelWarn, "json", &buf).Info("hidden")
	NewLogger(slog.LevelWarn, "json", &buf).Warn("shown")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "shown" {
		t.Fatalf("json log %q (%v), want one line with msg shown", buf.String(), err)
	}
	buf.Reset()
	NewLogger(slog.LevelInfo, "text", &buf).Info("hello")
	if !strings.Contains(buf.String(), "msg=hello") {
		t.Fatalf("text log %q lacks msg=hello", buf.String())
	}
}
