package ha

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/etcdtest"
)

// TestEnsureSecrets: the first controller puts its data directory's
// token and fleet secret in etcd; a second, with files of its own, gets
// them overwritten with etcd's (mode 0600); a third with none gets them
// written. A half-deleted pair is an error naming the missing key.
func TestEnsureSecrets(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first := t.TempDir()
	fleet, err := credential.LoadOrCreateFleetSecret(first)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tokenPath(first), []byte("first-controller-token-0123456789\n"), 0o600))
	s1, created, err := ensureSecrets(ctx, cli, "/fleet", first)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "first-controller-token-0123456789", s1.token)
	assert.Equal(t, fleet, s1.fleet)
	assert.Equal(t, "first-controller-token-0123456789", string(etcdtest.Get(t, cli, "/fleet"+apiTokenKey)))
	assert.Equal(t, hex.EncodeToString(fleet), string(etcdtest.Get(t, cli, "/fleet"+fleetSecretKey)))

	second := t.TempDir()
	_, err = credential.LoadOrCreateFleetSecret(second) // a secret of its own
	require.NoError(t, err)
	third := t.TempDir()
	for _, dir := range []string{second, third} {
		s, created, err := ensureSecrets(ctx, cli, "/fleet", dir)
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, s1, s)
		got, err := credential.LoadOrCreateFleetSecret(dir)
		require.NoError(t, err)
		assert.Equal(t, fleet, got, "fleet.secret of %s", dir)
		for _, name := range []string{credential.SecretFile, filepath.Base(tokenPath(dir))} {
			info, err := os.Stat(filepath.Join(dir, name))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), name)
		}
		b, err := os.ReadFile(tokenPath(dir))
		require.NoError(t, err)
		assert.Equal(t, s1.token, strings.TrimSpace(string(b)))
	}

	_, err = cli.Delete(ctx, "/fleet"+fleetSecretKey)
	require.NoError(t, err)
	_, _, err = ensureSecrets(ctx, cli, "/fleet", t.TempDir())
	require.ErrorContains(t, err, "shared secret /fleet/secrets/fleet-secret is missing in etcd")

	_, err = cli.Put(ctx, "/bad"+apiTokenKey, "short")
	require.NoError(t, err)
	_, err = cli.Put(ctx, "/bad"+fleetSecretKey, hex.EncodeToString(fleet))
	require.NoError(t, err)
	_, _, err = ensureSecrets(ctx, cli, "/bad", t.TempDir())
	require.ErrorContains(t, err, "shared secret /bad/secrets/api-token in etcd is shorter than 16 characters")
}
