package credential

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNodeTokenAt(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	assert.Equal(t, NodeToken(secret, "gw-1"), NodeTokenAt(secret, "gw-1", 0), "epoch 0 is the token of before epochs")
	seen := map[string]string{}
	for _, node := range []string{"gw-1", "gw-2", "gw-1.site"} {
		for e := range uint64(4) {
			tok := NodeTokenAt(secret, node, e)
			key := node + "@" + string(rune('0'+e))
			assert.NotContains(t, seen, tok, "%s collides with %s", key, seen[tok])
			seen[tok] = key
		}
	}
}

func TestParseEpochs(t *testing.T) {
	epochs, bad := parseEpochs([]byte("# comment\n\ngw-1 3\ngw-2 1\ngw-1 2\nBAD 1\ngw-3 0\ngw-4 x\ngw-5\n"))
	assert.Equal(t, map[string]uint64{"gw-1": 3, "gw-2": 1}, epochs)
	assert.Equal(t, []string{"BAD 1", "gw-3 0", "gw-4 x", "gw-5"}, bad)
}

func TestWriteReadEpochs(t *testing.T) {
	dir := t.TempDir()
	got, err := ReadEpochs(dir)
	require.NoError(t, err)
	assert.Empty(t, got, "no file: every node at epoch 0")
	require.NoError(t, WriteEpochs(dir, map[string]uint64{"b": 2, "a": 1, "zero": 0}))
	got, err = ReadEpochs(dir)
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"a": 1, "b": 2}, got)
	info, err := os.Stat(filepath.Join(dir, EpochsFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// TestRevocationsFollowEpochs: Load notices a change of the epochs file
// alone, and Revoked checks the fingerprint of the current epoch's token.
func TestRevocationsFollowEpochs(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("0123456789abcdef0123456789abcdef")
	r := NewRevocations(filepath.Join(dir, RevokedFile))
	_, _, err := r.Load(true)
	require.NoError(t, err)
	assert.Equal(t, NodeToken(secret, "gw-1"), r.NodeToken(secret, "gw-1"))

	require.NoError(t, WriteEpochs(dir, map[string]uint64{"gw-1": 1}))
	changed, _, err := r.Load(false)
	require.NoError(t, err)
	assert.True(t, changed, "the epochs file changed")
	assert.EqualValues(t, 1, r.Epoch("gw-1"))
	assert.Equal(t, NodeTokenAt(secret, "gw-1", 1), r.NodeToken(secret, "gw-1"))

	require.NoError(t, Revoke(dir, TokenFingerprint(NodeTokenAt(secret, "gw-1", 1))))
	_, _, err = r.Load(false)
	require.NoError(t, err)
	assert.True(t, r.Revoked(secret, "gw-1"), "the current token's fingerprint is listed")

	// A later epoch leaves the listed fingerprint behind. (Stamp the file
	// apart: a rewrite within the file system's time resolution and of
	// the same size would not be noticed by polling, only by Load(true).)
	require.NoError(t, WriteEpochs(dir, map[string]uint64{"gw-1": 2}))
	_, _, err = r.Load(true)
	require.NoError(t, err)
	assert.False(t, r.Revoked(secret, "gw-1"))
}

func TestReadmit(t *testing.T) {
	dir := t.TempDir()
	removed, err := Readmit(dir, "gw-1")
	require.NoError(t, err)
	assert.False(t, removed, "no list")
	require.NoError(t, Revoke(dir, "gw-1"))
	require.NoError(t, Revoke(dir, "gw-2"))
	require.NoError(t, Revoke(dir, "sha256:0123456789abcdef"))
	removed, err = Readmit(dir, "gw-1")
	require.NoError(t, err)
	assert.True(t, removed)
	data, err := os.ReadFile(filepath.Join(dir, RevokedFile))
	require.NoError(t, err)
	assert.Equal(t, "gw-2\nsha256:0123456789abcdef\n", string(data))
	removed, err = Readmit(dir, "gw-1")
	require.NoError(t, err)
	assert.False(t, removed)
}
