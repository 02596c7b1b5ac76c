package datakey

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeKeyFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secrets.key")
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

func TestFromFileRotation(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	b64 := base64.StdEncoding.EncodeToString
	old, err := FromFile(writeKeyFile(t, b64(k1)+"\n", 0o600))
	require.NoError(t, err)
	ct, err := old.Encrypt([]byte("value"), []byte("aad"))
	require.NoError(t, err)

	both, err := FromFile(writeKeyFile(t, "# rotated 2026-01-02\n"+b64(k2)+"\n\n"+b64(k1)+"\n", 0o600))
	require.NoError(t, err)
	assert.Equal(t, KeyID(k2), both.KeyID(), "the first key is the current one")
	assert.Equal(t, []string{KeyID(k2), KeyID(k1)}, both.IDs())
	pt, err := both.Decrypt(old.KeyID(), ct, []byte("aad"))
	require.NoError(t, err, "a kept key still decrypts")
	assert.Equal(t, "value", string(pt))

	_, err = both.Decrypt(old.KeyID(), ct, []byte("other"))
	require.ErrorContains(t, err, "authentication failed")
	onlyNew, err := New(k2)
	require.NoError(t, err)
	_, err = onlyNew.Decrypt(old.KeyID(), ct, []byte("aad"))
	require.ErrorIs(t, err, ErrUnknownKey)
}

func TestFromFileRefusals(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, KeySize))
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"readable by others", good, 0o644, "chmod 600"},
		{"empty", "# nothing\n", 0o600, "holds no key"},
		{"short key", base64.StdEncoding.EncodeToString([]byte("short")), 0o600, "line 1: not the base64 of 32 bytes"},
		{"not base64", good + "\n!!!\n", 0o600, "line 2"},
		{"the same key twice", good + "\n" + good + "\n", 0o600, "the same key as an earlier one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromFile(writeKeyFile(t, tc.content, tc.mode))
			require.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), good, "an error never quotes a key")
		})
	}
	_, err := FromFile(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestFromFleetSecretIsStable(t *testing.T) {
	a, err := FromFleetSecret([]byte("fleet-secret-one"))
	require.NoError(t, err)
	b, err := FromFleetSecret([]byte("fleet-secret-one"))
	require.NoError(t, err)
	c, err := FromFleetSecret([]byte("fleet-secret-two"))
	require.NoError(t, err)
	assert.Equal(t, a.KeyID(), b.KeyID(), "two controllers of one fleet derive the same key")
	assert.NotEqual(t, a.KeyID(), c.KeyID())
	ct, err := a.Encrypt([]byte("v"), nil)
	require.NoError(t, err)
	pt, err := b.Decrypt(a.KeyID(), ct, nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(pt))
}
