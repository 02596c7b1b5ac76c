package natsauth

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testOptions(t *testing.T) Options {
	t.Helper()
	issuer, err := nkeys.CreateAccount()
	require.NoError(t, err)
	return Options{
		URL: "nats://127.0.0.1:4222", User: "auth", Issuer: issuer, Account: "EDGESET",
		Secret: []byte("0123456789abcdef0123456789abcdef"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// TestUnansweredRequests: requests that name no user to refuse are
// dropped and counted, never answered.
func TestUnansweredRequests(t *testing.T) {
	r, err := New(testOptions(t))
	require.NoError(t, err)
	r.answer(&nats.Msg{Data: bytes.Repeat([]byte("x"), DefaultMaxRequestBytes+1)})
	r.answer(&nats.Msg{Data: []byte("not a jwt")})
	r.answer(&nats.Msg{Data: []byte("sealed"), Header: nats.Header{xkeyHeader: []string{"X..."}}})
	assert.Equal(t, Stats{Denied: map[string]uint64{
		ReasonTooLarge: 1, ReasonBadRequest: 1, ReasonEncrypted: 1,
	}}, r.Stats())
}

func TestOptionsValidate(t *testing.T) {
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	tests := []struct {
		name   string
		adjust func(*Options)
		want   string
	}{
		{"no URL", func(o *Options) { o.URL = "" }, "Options.URL"},
		{"no user", func(o *Options) { o.User = "" }, "Options.User"},
		{"no account", func(o *Options) { o.Account = "" }, "Options.Account"},
		{"no secret", func(o *Options) { o.Secret = nil }, "Options.Secret"},
		{"negative TTL", func(o *Options) { o.UserTTL = -1 }, "Options.UserTTL"},
		{"no issuer", func(o *Options) { o.Issuer = nil }, "Options.Issuer is nil"},
		{"user key as issuer", func(o *Options) { o.Issuer = user }, "not an account key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t)
			tc.adjust(&opts)
			_, err := New(opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
