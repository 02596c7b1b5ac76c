package enrollment

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/store"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestNewAndParseRoundTrip(t *testing.T) {
	for range 100 {
		code, rec, err := New(Spec{Uses: 5}, "ops", t0, rand.Reader)
		require.NoError(t, err)
		id, secret, err := Parse(code)
		require.NoError(t, err)
		assert.Equal(t, rec.ID, id)
		assert.NotContains(t, string(rec.SecretHash), string(secret), "the record keeps a hash only")
		assert.NoError(t, Claim(&rec, true, secret, "gw-1", false, t0))
	}
}

func TestNewDefaultsAndValidation(t *testing.T) {
	_, rec, err := New(Spec{Node: "gw-1"}, "ops", t0, bytes.NewReader(make([]byte, 64)))
	require.NoError(t, err)
	assert.Equal(t, 1, rec.Uses)
	assert.Equal(t, t0.Add(DefaultTTL), rec.ExpiresAt)

	for _, tt := range []struct {
		spec Spec
		want string
	}{
		{Spec{Node: "GW"}, "node:"},
		{Spec{Node: "gw-1", NamePrefix: "gw"}, "namePrefix:"},
		{Spec{Node: "gw-1", Uses: 3}, "uses:"},
		{Spec{Uses: -1}, "uses:"},
		{Spec{Uses: MaxUses + 1}, "uses:"},
		{Spec{TTL: time.Second}, "ttl:"},
		{Spec{TTL: MaxTTL + time.Hour}, "ttl:"},
		{Spec{NamePrefix: "-bad"}, "namePrefix:"},
		{Spec{Labels: map[string]string{"a": strings.Repeat("v", 64)}}, "labels[a]:"},
		{Spec{Labels: map[string]string{"": "v"}}, "labels: key"},
		{Spec{Description: strings.Repeat("d", MaxDescription+1)}, "description:"},
	} {
		_, _, err := New(tt.spec, "ops", t0, rand.Reader)
		require.Error(t, err, "%+v", tt.spec)
		assert.Contains(t, err.Error(), tt.want)
	}
	_, _, err = New(Spec{}, "ops", t0, bytes.NewReader(nil))
	assert.Error(t, err, "a random source that fails makes no code")
}

func TestParseRefusesMalformedCodes(t *testing.T) {
	code, _, err := New(Spec{}, "ops", t0, rand.Reader)
	require.NoError(t, err)
	for _, bad := range []string{"", "esn1_", "token", code[:len(code)-1], strings.Replace(code, "esn1_", "esn2_", 1),
		code + "a", strings.ToUpper(code)[:5] + "!" + code[6:]} {
		_, _, err := Parse(bad)
		assert.ErrorIs(t, err, ErrRefused, "%q", bad)
	}
	_, _, err = Parse("  " + code + "\n")
	assert.NoError(t, err, "white space around a pasted code is ignored")
}

func TestClaim(t *testing.T) {
	secret := []byte(strings.Repeat("s", secretBytes))
	mk := func(node, prefix string, uses int, enrolled ...string) store.EnrollmentRecord {
		_, rec, err := New(Spec{Node: node, NamePrefix: prefix, Uses: uses, TTL: time.Hour}, "ops", t0,
			bytes.NewReader(append(make([]byte, idBytes), secret...)))
		require.NoError(t, err)
		rec.Enrolled = enrolled
		return rec
	}
	for _, tt := range []struct {
		name   string
		rec    store.EnrollmentRecord
		found  bool
		secret []byte
		node   string
		known  bool
		at     time.Time
		want   string // "" admits
	}{
		{"one node", mk("gw-1", "", 1), true, secret, "gw-1", false, t0, ""},
		{"one node readmitted", mk("gw-1", "", 1), true, secret, "gw-1", true, t0, ""},
		{"absent", store.EnrollmentRecord{}, false, secret, "gw-1", false, t0, "unknown or wrong"},
		{"wrong secret", mk("gw-1", "", 1), true, []byte(strings.Repeat("x", secretBytes)), "gw-1", false, t0, "unknown or wrong"},
		{"expired", mk("gw-1", "", 1), true, secret, "gw-1", false, t0.Add(time.Hour), "expired"},
		{"used up", mk("", "", 2, "a", "b"), true, secret, "c", false, t0, "used up"},
		{"another node", mk("gw-1", "", 1), true, secret, "gw-2", false, t0, "enrolls node gw-1"},
		{"shared, new name", mk("", "gw-", 5, "gw-1"), true, secret, "gw-2", false, t0, ""},
		{"shared, outside prefix", mk("", "gw-", 5), true, secret, "sensor", false, t0, "starting with"},
		{"shared, known name", mk("", "", 5), true, secret, "gw-1", true, t0, "exists"},
		{"shared, name it enrolled", mk("", "", 5, "gw-1"), true, secret, "gw-1", false, t0, "exists"},
		{"shared, no name", mk("", "", 5), true, secret, "", false, t0, "names itself"},
		{"shared, invalid name", mk("", "", 5), true, secret, "GW", false, t0, "node name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := tt.rec
			before := len(rec.Enrolled)
			err := Claim(&rec, tt.found, tt.secret, tt.node, tt.known, tt.at)
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.node, rec.Enrolled[len(rec.Enrolled)-1])
				assert.Equal(t, tt.at, rec.UsedAt)
				return
			}
			require.ErrorIs(t, err, ErrRefused)
			assert.Contains(t, err.Error(), tt.want)
			assert.Len(t, rec.Enrolled, before, "a refusal records no use")
		})
	}
}

func TestPrunable(t *testing.T) {
	_, rec, err := New(Spec{Uses: 1, TTL: time.Hour}, "ops", t0, rand.Reader)
	require.NoError(t, err)
	assert.False(t, Prunable(rec, t0.Add(time.Hour+KeepExpired-time.Second)))
	assert.True(t, Prunable(rec, t0.Add(time.Hour+KeepExpired)))
	rec.Enrolled, rec.UsedAt = []string{"gw-1"}, t0.Add(time.Minute)
	assert.True(t, Prunable(rec, t0.Add(time.Minute+KeepExpired)), "a used-up code is kept KeepExpired after its last use")
}
