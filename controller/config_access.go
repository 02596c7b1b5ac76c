package controller

import (
	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
)

// applyAccessDefaults fills the zero user and audit limits.
func (c *Config) applyAccessDefaults() {
	if c.MaxUsers == 0 {
		c.MaxUsers = access.DefaultMaxUsers
	}
	if c.UserMaxTTL == 0 {
		c.UserMaxTTL = access.DefaultMaxTTL
	}
	if c.AuditMaxEntries == 0 {
		c.AuditMaxEntries = audit.DefaultMaxEntries
	}
	if c.AuditMaxAge == 0 {
		c.AuditMaxAge = audit.DefaultMaxAge
	}
}

// userLimits are the access.Limits of the configuration.
func (c *Config) userLimits() access.Limits {
	return access.Limits{MaxUsers: c.MaxUsers, MaxTTL: c.UserMaxTTL, RequireTTL: c.UserRequireTTL}
}

// auditRetention is the audit.Retention of the configuration.
func (c *Config) auditRetention() audit.Retention {
	return audit.Retention{MaxEntries: c.AuditMaxEntries, MaxAge: c.AuditMaxAge}
}

// validateAccess checks the user and audit limits.
func (c *Config) validateAccess(bad func(key, format string, args ...any)) {
	if c.MaxUsers < 0 || c.MaxUsers > maxUsersLimit {
		bad("user-max", "%d is outside 1..%d (0 for the default %d)", c.MaxUsers, maxUsersLimit, access.DefaultMaxUsers)
	}
	if c.UserMaxTTL < 0 || (c.UserMaxTTL > 0 && c.UserMaxTTL < access.MinTTL) {
		bad("user-max-ttl", "%s: want at least %s (0 for the default %s)", c.UserMaxTTL, access.MinTTL, access.DefaultMaxTTL)
	}
	if c.AuditMaxEntries < 0 || c.AuditMaxEntries > audit.MaxEntriesLimit {
		bad("audit-max-entries", "%d is outside 1..%d (0 for the default %d)", c.AuditMaxEntries, audit.MaxEntriesLimit, audit.DefaultMaxEntries)
	}
	if c.AuditMaxAge < 0 || (c.AuditMaxAge > 0 && c.AuditMaxAge < audit.MinMaxAge) {
		bad("audit-max-age", "%s: want at least %s (0 for the default %s)", c.AuditMaxAge, audit.MinMaxAge, audit.DefaultMaxAge)
	}
}

// maxUsersLimit bounds user-max: Authenticate compares a token with every
// user's hash.
const maxUsersLimit = 10000
