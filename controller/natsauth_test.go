package controller

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"
)

// TestNATSAuthValidation: the nats-auth keys go together, need an
// external broker, and each problem names its key.
func TestNATSAuthValidation(t *testing.T) {
	full := func(c Config) Config {
		c.BrokerURLs = []string{"tcp://nats-1:1883"}
		c.NATSAuthURLs = []string{"nats://nats-1:4222"}
		c.NATSAuthPasswordFile, c.NATSAuthIssuerSeedFile = "pw", "seed"
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "off", cfg: Config{}},
		{name: "complete", cfg: full(Config{})},
		{name: "embedded broker", cfg: func() Config { c := full(Config{}); c.BrokerURLs = nil; return c }(), wantErr: "nats-auth-url: needs broker-url"},
		{name: "not a NATS URL", cfg: func() Config { c := full(Config{}); c.NATSAuthURLs = []string{"tcp://x:1"}; return c }(), wantErr: `nats-auth-url[0]: "tcp://x:1" is not a NATS URL`},
		{name: "no password", cfg: func() Config { c := full(Config{}); c.NATSAuthPasswordFile = ""; return c }(), wantErr: "nats-auth-password-file: required with nats-auth-url"},
		{name: "no seed", cfg: func() Config { c := full(Config{}); c.NATSAuthIssuerSeedFile = ""; return c }(), wantErr: "nats-auth-issuer-seed-file: required with nats-auth-url"},
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
}

// TestNATSAuthBadFiles: a controller whose callout files are missing, empty
// or not a seed does not start, and says which key.
func TestNATSAuthBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	userSeed, err := user.Seed()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, password, seed, wantErr string
	}{
		{"missing password", filepath.Join(dir, "absent"), write("seed", "x"), "nats-auth-password-file"},
		{"empty password", write("empty", "\n"), write("seed2", "x"), "nats-auth-password-file " + filepath.Join(dir, "empty") + ": empty"},
		{"not a seed", write("pw", "secret"), write("bad-seed", "not a seed"), "nats-auth-issuer-seed-file " + filepath.Join(dir, "bad-seed") + ": not an nkey seed"},
		{"a user seed", write("pw2", "secret"), write("user-seed", string(userSeed)), "not an account key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{
				DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", BrokerURLs: []string{"tcp://127.0.0.1:1"},
				NATSAuthURLs: []string{"nats://127.0.0.1:1"}, NATSAuthPasswordFile: tc.password, NATSAuthIssuerSeedFile: tc.seed,
			}, nil)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
