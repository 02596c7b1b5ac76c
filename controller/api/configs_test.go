package api

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretBackend answers secret calls, recording whether values were asked.
type secretBackend struct {
	fakeBackend
	asked []bool
	keys  []string
}

func (b *secretBackend) GetSecret(_ context.Context, key string, show bool) (Secret, error) {
	b.asked, b.keys = append(b.asked, show), append(b.keys, key)
	s := Secret{ConfigMeta: ConfigMeta{Namespace: "edge", Name: "api-key", Keys: []ConfigKey{{Key: "token", Size: 6}}}, Type: "Opaque"}
	if show {
		s.Data = map[string][]byte{"token": []byte("s3cr3t")}
	}
	return s, nil
}

func (b *secretBackend) ListSecrets(_ context.Context, show bool) ([]Secret, error) {
	b.asked = append(b.asked, show)
	return nil, nil
}

// TestSecretValuesOnlyWhenAsked: the client asks for values only with
// showValues, and the server passes exactly that to the backend.
func TestSecretValuesOnlyWhenAsked(t *testing.T) {
	b := &secretBackend{}
	c := newTestServerFor(t, b)
	ctx := context.Background()

	s, err := c.GetSecret(ctx, "edge/api-key", false)
	require.NoError(t, err)
	assert.Nil(t, s.Data)
	assert.Equal(t, []ConfigKey{{Key: "token", Size: 6}}, s.Keys)

	s, err = c.GetSecret(ctx, "edge/api-key", true)
	require.NoError(t, err)
	assert.Equal(t, "s3cr3t", string(s.Data["token"]))

	_, err = c.ListSecrets(ctx, false)
	require.NoError(t, err)
	_, err = c.ListSecrets(ctx, true)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true, false, true}, b.asked)
	assert.Equal(t, []string{"edge/api-key", "edge/api-key"}, b.keys)
}
