package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/edgeset/edgeset/controller/datakey"
)

const atRestValue = "s3cr3t-at-rest-value"

func dataKeys(t *testing.T, keys ...[]byte) *datakey.Keys {
	t.Helper()
	k, err := datakey.New(keys...)
	require.NoError(t, err)
	return k
}

func putSecret(t *testing.T, s *Store, name string) SecretRecord {
	t.Helper()
	var rec SecretRecord
	require.NoError(t, s.Update(false, func(tx *Txn) (err error) {
		rec, _, err = tx.PutSecret(testSecret(name, map[string]string{"token": atRestValue}), "test", t0)
		return err
	}))
	return rec
}

// rawSecret is the secrets bucket's value under key, as in the file.
func rawSecret(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	var out []byte
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bucketSecrets).Get([]byte(key)))
		return nil
	}))
	return out
}

// holdsPlaintext reports whether b holds the test secret's value, raw or
// in base64 (as JSON encodes bytes).
func holdsPlaintext(b []byte) bool {
	return bytes.Contains(b, []byte(atRestValue)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(atRestValue))))
}

func TestSecretRecordsEncryptedAtRest(t *testing.T) {
	k1 := bytes.Repeat([]byte{1}, datakey.KeySize)
	s, path := openTemp(t, Options{SecretCipher: dataKeys(t, k1)})
	put := putSecret(t, s, "api-key")

	raw := rawSecret(t, s, "default/api-key")
	assert.True(t, bytes.HasPrefix(raw, encryptedPrefix), "the record is stored encrypted: %.60s", raw)
	assert.False(t, holdsPlaintext(raw))
	var enc encryptedRecord
	require.NoError(t, json.Unmarshal(raw, &enc))
	assert.Equal(t, datakey.KeyID(k1), enc.Encrypted.KeyID, "the record names its key")

	got, err := s.GetSecret("default/api-key")
	require.NoError(t, err)
	assert.Equal(t, put, got)
	list, err := s.ListSecrets()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, atRestValue, string(list[0].Object.Data["token"]))
	require.NoError(t, s.Close())

	file, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.False(t, holdsPlaintext(file), "the store file holds no plaintext of the secret")

	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no key", Options{}},
		{"another key", Options{SecretCipher: dataKeys(t, bytes.Repeat([]byte{2}, datakey.KeySize))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(path, tc.opts)
			require.NoError(t, err)
			defer s.Close()
			_, err = s.GetSecret("default/api-key")
			require.Error(t, err)
			assert.NotContains(t, err.Error(), atRestValue)
			_, err = s.ListSecrets()
			require.Error(t, err, "a record it cannot decrypt is an error, not an absent Secret")
		})
	}
}

// TestRewrapSecrets: a store written before encryption is read and
// rewritten encrypted; a key rotation (the new key first, the old one
// kept) moves every record to the new key, after which the old key can go.
func TestRewrapSecrets(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, datakey.KeySize), bytes.Repeat([]byte{2}, datakey.KeySize)
	s, path := openTemp(t, Options{})
	putSecret(t, s, "a")
	putSecret(t, s, "b")
	assert.True(t, holdsPlaintext(rawSecret(t, s, "default/a")), "without a cipher the record is in the clear")
	n, err := s.RewrapSecrets()
	require.NoError(t, err)
	assert.Zero(t, n, "without a cipher nothing is rewritten")
	require.NoError(t, s.Close())

	reopen := func(opts Options) *Store {
		s, err := Open(path, opts)
		require.NoError(t, err)
		return s
	}
	s = reopen(Options{SecretCipher: dataKeys(t, k1)})
	got, err := s.GetSecret("default/a")
	require.NoError(t, err, "a record written before encryption is read")
	assert.Equal(t, atRestValue, string(got.Object.Data["token"]))
	n, err = s.RewrapSecrets()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.False(t, holdsPlaintext(rawSecret(t, s, "default/a")))
	n, err = s.RewrapSecrets()
	require.NoError(t, err)
	assert.Zero(t, n, "a second rewrap finds nothing to do")
	require.NoError(t, s.Close())

	s = reopen(Options{SecretCipher: dataKeys(t, k2, k1)})
	n, err = s.RewrapSecrets()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	var enc encryptedRecord
	require.NoError(t, json.Unmarshal(rawSecret(t, s, "default/b"), &enc))
	assert.Equal(t, datakey.KeyID(k2), enc.Encrypted.KeyID)
	require.NoError(t, s.Close())

	s = reopen(Options{SecretCipher: dataKeys(t, k2)})
	defer s.Close()
	list, err := s.ListSecrets()
	require.NoError(t, err, "the old key is no longer needed")
	assert.Len(t, list, 2)
}

// TestEncryptedRecordBoundToItsKey: a record copied under another key of
// the bucket does not decrypt.
func TestEncryptedRecordBoundToItsKey(t *testing.T) {
	s, _ := openTempUnmirrored(t, Options{SecretCipher: dataKeys(t, bytes.Repeat([]byte{1}, datakey.KeySize))})
	putSecret(t, s, "a")
	raw := rawSecret(t, s, "default/a")
	require.NoError(t, s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSecrets).Put([]byte("default/b"), raw)
	}))
	_, err := s.GetSecret("default/b")
	require.ErrorContains(t, err, "authentication failed")
}

// TestRewrapSecretsIsReplicated: the rewrap's writes reach the replica
// (the mirror compares the files when the test ends).
func TestRewrapSecretsIsReplicated(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, datakey.KeySize), bytes.Repeat([]byte{2}, datakey.KeySize)
	s, _ := openTemp(t, Options{SecretCipher: dataKeys(t, k1)})
	putSecret(t, s, "a")
	s.secrets = dataKeys(t, k2, k1) // as a restart with a new key file would
	n, err := s.RewrapSecrets()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestNodeKeys(t *testing.T) {
	s, _ := openTemp(t, Options{})
	keys, err := s.ListNodeKeys()
	require.NoError(t, err)
	assert.Empty(t, keys, "a store without the bucket has no keys")
	found, err := s.DeleteNodeKey("gw-1")
	require.NoError(t, err)
	assert.False(t, found)

	a := NodeKeyRecord{Node: "gw-1", PublicKey: "x25519:a", KeyID: "a", RegisteredAt: t0, Source: "enrollment"}
	b := NodeKeyRecord{Node: "gw-2", PublicKey: "x25519:b", KeyID: "b", RegisteredAt: t0, Source: "node"}
	require.NoError(t, s.PutNodeKey(a))
	require.NoError(t, s.PutNodeKey(b))
	a.PublicKey, a.KeyID = "x25519:a2", "a2"
	require.NoError(t, s.PutNodeKey(a))
	found, err = s.DeleteNodeKey("gw-2")
	require.NoError(t, err)
	assert.True(t, found)
	keys, err = s.ListNodeKeys()
	require.NoError(t, err)
	assert.Equal(t, map[string]NodeKeyRecord{"gw-1": a}, keys)
}
