package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/edgeset/edgeset/controller/api"
)

// Client settings and their defaults.
const (
	defaultServer    = "http://127.0.0.1:8080"
	defaultTokenFile = "data/admin.token"
)

// clientConfig says how to reach the controller, and where each setting
// came from (for error messages).
type clientConfig struct {
	Server      string
	Token       string
	TokenSource string
	ConfigFile  string
}

// addClientFlags adds the persistent flags of every command that talks to
// the controller.
func addClientFlags(f *pflag.FlagSet) {
	f.String("server", defaultServer, "controller API URL (env EDGESET_SERVER)")
	f.String("token", "", "API bearer token (env EDGESET_TOKEN)")
	f.String("token-file", "", "file holding the API token (default ./"+defaultTokenFile+" when present)")
	f.String("client-config", "", "client config file (default ~/.config/edgeset/config.yaml when present)")
}

// loadClientConfig merges flags, EDGESET_ variables and the client config
// file, in that order of precedence.
func loadClientConfig(cmd *cobra.Command) (clientConfig, error) {
	v := viper.New()
	_ = v.BindPFlags(cmd.Flags())
	v.SetEnvPrefix("EDGESET")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	cfg := clientConfig{}
	if err := readClientConfigFile(v, &cfg); err != nil {
		return cfg, err
	}
	cfg.Server = strings.TrimRight(v.GetString("server"), "/")
	if !strings.Contains(cfg.Server, "://") {
		cfg.Server = "http://" + cfg.Server
	}
	return cfg, resolveToken(v, &cfg)
}

func readClientConfigFile(v *viper.Viper, cfg *clientConfig) error {
	path := v.GetString("client-config")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		path = filepath.Join(home, ".config", "edgeset", "config.yaml")
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return fmt.Errorf("read client config %s: %w", path, err)
	}
	cfg.ConfigFile = path
	return nil
}

// resolveToken finds the token: --token / EDGESET_TOKEN, then --token-file,
// then ./data/admin.token (what `make run` creates).
func resolveToken(v *viper.Viper, cfg *clientConfig) error {
	if t := v.GetString("token"); t != "" {
		cfg.Token, cfg.TokenSource = t, "--token or EDGESET_TOKEN"
		return nil
	}
	path, explicit := v.GetString("token-file"), true
	if path == "" {
		path, explicit = defaultTokenFile, false
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		cfg.Token, cfg.TokenSource = strings.TrimSpace(string(b)), path
		return nil
	case !explicit && errors.Is(err, fs.ErrNotExist):
		return nil // the controller will say the token is missing
	default:
		return fmt.Errorf("read token file: %w", err)
	}
}

// newAPIClient returns a client for the controller the flags name.
func newAPIClient(cmd *cobra.Command) (*api.Client, clientConfig, error) {
	cfg, err := loadClientConfig(cmd)
	if err != nil {
		return nil, cfg, err
	}
	return api.NewClient(cfg.Server, cfg.Token, nil), cfg, nil
}

// explain turns a client error into one that says what was tried and what
// to do next.
func (cfg clientConfig) explain(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, api.ErrUnauthorized) {
		src := cfg.TokenSource
		if src == "" {
			src = "no token found (tried --token, EDGESET_TOKEN, --token-file, ./" + defaultTokenFile + ")"
		}
		return fmt.Errorf("%w\n  token from: %s\n  the controller prints where its token is on start (DATA_DIR/admin.token)", err, src)
	}
	var se *api.StatusError
	if errors.As(err, &se) || errors.Is(err, api.ErrNotFound) {
		// The controller answered: the hint about reaching it would mislead.
		return err
	}
	where := "--server, EDGESET_SERVER or the default"
	if cfg.ConfigFile != "" {
		where += " (client config " + cfg.ConfigFile + ")"
	}
	return fmt.Errorf("%w\n  server %s from %s\n  is edgeset-controller running? start one with `make run`", err, cfg.Server, where)
}
