package schema

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleSealedSecret is a sealed secret message as the wire carries it;
// its ciphertext is filler (package sealing makes and opens real ones).
func sampleSealedSecret() SealedSecretMessage {
	return SealedSecretMessage{SchemaVersion: WireVersion, Node: "pi-01", Hash: SecretHash(sampleSecret()),
		Sealed: SealedBox{Suite: SealSuite, KeyID: "3f1c0e5a9b7d2c4e6f8a0b1c2d3e4f50", Ciphertext: bytes.Repeat([]byte{0xa5}, 80)}}
}

func TestSealedSecretDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		mut         func(*SealedSecretMessage)
	}{
		{"another suite", "sealed.suite", func(m *SealedSecretMessage) { m.Sealed.Suite = "hpke-base-p256" }},
		{"key ID not hex", "sealed.keyId", func(m *SealedSecretMessage) { m.Sealed.KeyID = "KEY" }},
		{"ciphertext too short", "sealed.ciphertext", func(m *SealedSecretMessage) { m.Sealed.Ciphertext = m.Sealed.Ciphertext[:47] }},
		{"no node", "node", func(m *SealedSecretMessage) { m.Node = "" }},
		{"bad hash", "hash", func(m *SealedSecretMessage) { m.Hash = "xyz" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleSealedSecret()
			tc.mut(&m)
			b, err := Encode(m)
			require.NoError(t, err)
			_, err = DecodeSealedSecretMessage(b)
			require.ErrorContains(t, err, tc.field)
		})
	}
	_, err := DecodeSealedSecretMessage([]byte(`{"schemaVersion":1,"node":"pi-01","hash":"b2e4d2d4aac84851b3a7","sealed":{},"secret":{}}`))
	require.ErrorContains(t, err, "secret", "a message is sealed or not, never both")
}

func TestIsSealedSecret(t *testing.T) {
	sealed, err := os.ReadFile(goldenPath("sealed-secret"))
	require.NoError(t, err)
	plain, err := os.ReadFile(goldenPath("secret"))
	require.NoError(t, err)
	assert.True(t, IsSealedSecret(sealed))
	assert.False(t, IsSealedSecret(plain))
	assert.False(t, IsSealedSecret([]byte(`{"secret":{"data":{"sealed":"eA=="}}}`)), "a key named sealed inside the Secret is not the field")
	assert.False(t, IsSealedSecret(nil))
}

func TestSealedSizeBoundsTheMessage(t *testing.T) {
	m := sampleSealedSecret()
	b, err := Encode(m)
	require.NoError(t, err)
	assert.Equal(t, len(b), SealedSize(len(m.Node), len(m.Sealed.Ciphertext)-minSealedBytes))
}
