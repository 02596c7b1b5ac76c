package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
	// Servers are the controller's API URLs (an HA controller's standbys),
	// tried in order (see failover); Server is them comma-separated, for
	// messages.
	Servers     []string
	Server      string
	Token       string
	TokenSource string
	ConfigFile  string
	// Command is the command line's verb ("rollout status") and Timeout
	// its --timeout when it has one, for the message of a deadline.
	Command string
	Timeout string
}

// addClientFlags adds the persistent flags of every command that talks to
// the controller.
func addClientFlags(f *pflag.FlagSet) {
	f.String("server", defaultServer, "controller API URL, or a comma-separated list tried in turn when one is unreachable or answers 503 (env EDGESET_SERVER)")
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
	cfg := clientConfig{Command: strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")}
	if f := cmd.Flags().Lookup("timeout"); f != nil {
		cfg.Timeout = f.Value.String()
	}
	if err := readClientConfigFile(v, &cfg); err != nil {
		return cfg, err
	}
	servers, err := parseServers(v.Get("server"))
	if err != nil {
		return cfg, err
	}
	cfg.Servers, cfg.Server = servers, strings.Join(servers, ",")
	return cfg, resolveToken(cmd.Flags(), v, &cfg)
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

// resolveToken finds the token, first found wins: --token, --token-file,
// EDGESET_TOKEN, EDGESET_TOKEN_FILE, the client config file's token and
// token-file, then ./data/admin.token (what `make run` creates). A flag
// always beats the environment (docs/configuration.md).
func resolveToken(flags *pflag.FlagSet, v *viper.Viper, cfg *clientConfig) error {
	switch {
	case flags.Changed("token"):
		t, _ := flags.GetString("token")
		cfg.Token, cfg.TokenSource = t, "--token"
		return nil
	case flags.Changed("token-file"):
		path, _ := flags.GetString("token-file")
		return readTokenFile(cfg, path, "--token-file "+path, true)
	case os.Getenv("EDGESET_TOKEN") != "":
		cfg.Token, cfg.TokenSource = os.Getenv("EDGESET_TOKEN"), "EDGESET_TOKEN"
		return nil
	case os.Getenv("EDGESET_TOKEN_FILE") != "":
		path := os.Getenv("EDGESET_TOKEN_FILE")
		return readTokenFile(cfg, path, "EDGESET_TOKEN_FILE="+path, true)
	case v.GetString("token") != "":
		cfg.Token, cfg.TokenSource = v.GetString("token"), "token in "+cfg.ConfigFile
		return nil
	case v.GetString("token-file") != "":
		path := v.GetString("token-file")
		return readTokenFile(cfg, path, "token-file "+path+" in "+cfg.ConfigFile, true)
	}
	return readTokenFile(cfg, defaultTokenFile, defaultTokenFile, false)
}

// readTokenFile reads the token at path; a missing default file is no
// error (the controller will say the token is missing), an empty one is.
func readTokenFile(cfg *clientConfig, path, source string, explicit bool) error {
	b, err := os.ReadFile(path)
	switch {
	case err == nil && strings.TrimSpace(string(b)) == "":
		return fmt.Errorf("token file (%s) is empty", source)
	case err == nil:
		cfg.Token, cfg.TokenSource = strings.TrimSpace(string(b)), source
		return nil
	case !explicit && errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("read token file (%s): %w", source, err)
	}
}

// apiTimeout bounds one API request (all its servers' attempts together).
const apiTimeout = 30 * time.Second

// newAPIClient returns a client for the controller the flags name; with
// several servers, its requests fail over between them.
func newAPIClient(cmd *cobra.Command) (*api.Client, clientConfig, error) {
	cfg, err := loadClientConfig(cmd)
	if err != nil {
		return nil, cfg, err
	}
	return cfg.apiClient(), cfg, nil
}

// apiClient returns the API client of cfg's servers.
func (cfg clientConfig) apiClient() *api.Client {
	hc := &http.Client{Timeout: apiTimeout}
	if len(cfg.Servers) > 1 {
		hc = newFailoverClient(cfg.Servers, apiTimeout)
	}
	return api.NewClient(cfg.Servers[0], cfg.Token, hc)
}

// explain turns a client error into one that says what happened and what
// to do next: a refused token names where it was read; a deadline says
// how long was waited for what; only a failure to connect (refused, no
// route, unknown host) suggests starting a controller; a server that is
// not an edgeset controller is named as such.
func (cfg clientConfig) explain(err error) error {
	if err == nil {
		return nil
	}
	var te *timeoutError
	switch {
	case errors.Is(err, api.ErrUnauthorized):
		src := cfg.TokenSource
		if src == "" {
			src = "no token found (tried --token, --token-file, EDGESET_TOKEN, EDGESET_TOKEN_FILE, ./" + defaultTokenFile + ")"
		}
		return fmt.Errorf("%w\n  token from: %s\n  the controller prints where its token is on start (DATA_DIR/admin.token)", err, src)
	case errors.As(err, &te):
		return err
	case errors.Is(err, api.ErrNotController):
		return fmt.Errorf("%s is not an edgeset controller (or not one this edgesetctl speaks to): %w\n  server %s from %s", cfg.Server, err, cfg.Server, cfg.serverSource())
	case errors.Is(err, context.DeadlineExceeded) && cfg.Timeout != "":
		return fmt.Errorf("timed out after %s waiting for %s (--timeout): %w", cfg.Timeout, cfg.Command, err)
	case errors.Is(err, context.DeadlineExceeded):
		return err // the API client's own timeout: its message says so
	case isConnectFailure(err):
		return fmt.Errorf("%w\n  server %s from %s\n  is edgeset-controller running? start one with `make run`", err, cfg.Server, cfg.serverSource())
	}
	return err
}

func (cfg clientConfig) serverSource() string {
	where := "--server, EDGESET_SERVER or the default"
	if cfg.ConfigFile != "" {
		where += " (client config " + cfg.ConfigFile + ")"
	}
	return where
}

// isConnectFailure reports whether err is a failure to connect at all:
// refused, no route, unknown host.
func isConnectFailure(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return true
	}
	return false
}

// timeoutError is a command's own deadline (--timeout) passing.
type timeoutError struct {
	after time.Duration
	what  string
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("timed out after %s waiting for %s", e.after, e.what)
}

// withTimeout is context.WithTimeout whose expiry reads "timed out after
// d waiting for what" in every error that carries it (see
// api.Client: a request cut short by ctx returns context.Cause).
func withTimeout(ctx context.Context, d time.Duration, what string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, &timeoutError{after: d, what: what})
}
