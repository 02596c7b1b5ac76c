package ha

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/internal/etcdtest"
	"github.com/edgeset/edgeset/signing"
)

// TestSigningKeyRegistry: each controller registers its own data
// directory's online key under its ID (a new key replaces its old entry);
// the peers listed are checked (a public key whose ID does not match is an
// error naming the etcd key) and bounded.
func TestSigningKeyRegistry(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	peers := signingPeers(cli, "/fleet")

	dir1, dir2 := t.TempDir(), t.TempDir()
	id1, err := registerSigningKey(ctx, cli, "/fleet", "c1", dir1)
	require.NoError(t, err)
	id2, err := registerSigningKey(ctx, cli, "/fleet", "c2", dir2)
	require.NoError(t, err)
	require.NotEqual(t, id1, id2)
	priv, err := controller.LoadOrCreateSigningKey(dir1)
	require.NoError(t, err)
	assert.Equal(t, id1, signing.KeyID(priv.Public().(ed25519.PublicKey)), "the registered key is the data directory's")

	got, err := peers(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "c1", got[0].Controller)
	assert.Equal(t, id1, got[0].KeyID)
	assert.Equal(t, "c2", got[1].Controller)
	assert.Equal(t, id2, got[1].KeyID)

	again, err := registerSigningKey(ctx, cli, "/fleet", "c2", t.TempDir()) // c2 lost its data directory
	require.NoError(t, err)
	got, err = peers(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2, "c2's new key replaced its old entry")
	assert.Equal(t, again, got[1].KeyID)

	_, err = cli.Put(ctx, "/fleet"+onlineKeysKey+"c3", fmt.Sprintf(`{"controller":"c3","keyID":%q,"publicKey":%q}`, id1, got[1].PublicKey))
	require.NoError(t, err)
	_, err = peers(ctx)
	require.ErrorContains(t, err, "online key /fleet/signing/online-keys/c3 in etcd: keyID")

	for i := range MaxControllerKeys {
		_, err := registerSigningKey(ctx, cli, "/many", fmt.Sprintf("c%d", i), t.TempDir())
		require.NoError(t, err)
	}
	got, err = signingPeers(cli, "/many")(ctx)
	require.NoError(t, err)
	assert.Len(t, got, MaxControllerKeys)
	_, err = registerSigningKey(ctx, cli, "/many", "one-too-many", t.TempDir())
	require.NoError(t, err)
	_, err = signingPeers(cli, "/many")(ctx)
	require.ErrorContains(t, err, fmt.Sprintf("more than %d online keys", MaxControllerKeys))
}
