package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAccessConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" valid, else a substring naming the key
	}{
		{"defaults", func(*Config) {}, ""},
		{"too many users", func(c *Config) { c.MaxUsers = maxUsersLimit + 1 }, "user-max: 10001 is outside 1..10000"},
		{"negative users", func(c *Config) { c.MaxUsers = -1 }, "user-max: -1"},
		{"too short a max ttl", func(c *Config) { c.UserMaxTTL = time.Second }, "user-max-ttl: 1s: want at least 1m0s"},
		{"too many audit entries", func(c *Config) { c.AuditMaxEntries = 1 << 30 }, "audit-max-entries:"},
		{"too short an audit age", func(c *Config) { c.AuditMaxAge = time.Minute }, "audit-max-age: 1m0s: want at least 1h0m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{}
			c.ApplyDefaults()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
