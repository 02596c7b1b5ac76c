package access

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// TokenPrefix starts every user token, so that a leaked one is
// recognisable (secret scanners, logs) and an HA standby can tell a user
// token it cannot check from garbage.
const TokenPrefix = "esu_"

// Limits bound what clients can make the controller hold.
const (
	// DefaultMaxUsers is Limits.MaxUsers's default.
	DefaultMaxUsers = 100
	// MinTTL is the shortest token lifetime a user may be created with.
	MinTTL = time.Minute
	// DefaultMaxTTL is Limits.MaxTTL's default: a year.
	DefaultMaxTTL = 366 * 24 * time.Hour
	// MaxNameLength bounds a user name.
	MaxNameLength = 63
)

// Errors of Users, wrapped with the name or field.
var (
	// ErrInvalid: a user's name, role, namespace or TTL is not acceptable.
	ErrInvalid = errors.New("invalid user")
	// ErrExists: a user of that name exists.
	ErrExists = errors.New("user exists")
	// ErrNotFound: no user of that name.
	ErrNotFound = errors.New("no such user")
	// ErrTooMany: the controller holds Limits.MaxUsers users.
	ErrTooMany = errors.New("too many users")
	// ErrUnauthenticated: the token is no user's, or its user has expired.
	ErrUnauthenticated = errors.New("unauthenticated")
)

// User is one API user as stored: never its token, only the token's
// SHA-256.
type User struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Namespace, when set, scopes the user to it (see the package doc).
	Namespace string `json:"namespace,omitempty"`
	// TokenID is the public part of the token that finds the user
	// (empty for the first admin, whose token is admin.token's).
	TokenID   string    `json:"tokenID,omitempty"`
	TokenHash []byte    `json:"tokenHash"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is when the token stops working; zero: never.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// CreatedBy names the user who created it ("" for the first admin,
	// made from the data directory's admin token).
	CreatedBy string `json:"createdBy,omitempty"`
}

// Expired reports whether u's token no longer works at now.
func (u User) Expired(now time.Time) bool {
	return !u.ExpiresAt.IsZero() && !now.Before(u.ExpiresAt)
}

// String describes u as denials name it: `"ops" (viewer)`, `"ops"
// (operator in namespace team-a)`.
func (u User) String() string {
	if u.Namespace != "" {
		return fmt.Sprintf("%q (%s in namespace %s)", u.Name, u.Role, u.Namespace)
	}
	return fmt.Sprintf("%q (%s)", u.Name, u.Role)
}

// nameRE is a DNS-1123 label, as Kubernetes names most things.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Spec is what a user is created from.
type Spec struct {
	Name      string
	Role      Role
	Namespace string
	// TTL is the token's lifetime; zero: no expiry (unless Limits.MaxTTL
	// demands one).
	TTL time.Duration
}

// Validate returns every problem of s under lim, each naming its field.
func (s Spec) Validate(lim Limits) error {
	lim = lim.withDefaults()
	var errs []error
	switch {
	case s.Name == "":
		errs = append(errs, fmt.Errorf("%w: name: required", ErrInvalid))
	case len(s.Name) > MaxNameLength || !nameRE.MatchString(s.Name):
		errs = append(errs, fmt.Errorf("%w: name: %q must be at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			ErrInvalid, s.Name, MaxNameLength))
	}
	if _, err := ParseRole(string(s.Role)); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	if s.Namespace != "" && (len(s.Namespace) > MaxNameLength || !nameRE.MatchString(s.Namespace)) {
		errs = append(errs, fmt.Errorf("%w: namespace: %q is not a valid namespace name", ErrInvalid, s.Namespace))
	}
	switch {
	case s.TTL < 0:
		errs = append(errs, fmt.Errorf("%w: ttl: must not be negative, got %s", ErrInvalid, s.TTL))
	case s.TTL > 0 && s.TTL < MinTTL:
		errs = append(errs, fmt.Errorf("%w: ttl: %s is shorter than the minimum %s", ErrInvalid, s.TTL, MinTTL))
	case s.TTL > lim.MaxTTL:
		errs = append(errs, fmt.Errorf("%w: ttl: %s is longer than the maximum %s (user-max-ttl)", ErrInvalid, s.TTL, lim.MaxTTL))
	case s.TTL == 0 && lim.RequireTTL:
		errs = append(errs, fmt.Errorf("%w: ttl: required (at most %s, user-max-ttl)", ErrInvalid, lim.MaxTTL))
	}
	return errors.Join(errs...)
}

// Limits bound the users.
type Limits struct {
	// MaxUsers bounds how many users exist; default DefaultMaxUsers.
	MaxUsers int
	// MaxTTL bounds a token's lifetime; default DefaultMaxTTL.
	MaxTTL time.Duration
	// RequireTTL refuses a user without a TTL.
	RequireTTL bool
}

func (l Limits) withDefaults() Limits {
	if l.MaxUsers <= 0 {
		l.MaxUsers = DefaultMaxUsers
	}
	if l.MaxTTL <= 0 {
		l.MaxTTL = DefaultMaxTTL
	}
	return l
}

// Token layout: TokenPrefix, an ID of idLength base32 characters naming
// the user (not secret: it only finds the user's hash), '_', and 256
// random bits, base64url.
const (
	idLength    = 8
	secretBytes = 32
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewToken returns a new random user token, its ID and its hash.
func NewToken() (token, id string, hash []byte) {
	raw := make([]byte, 5+secretBytes)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	id = strings.ToLower(idEncoding.EncodeToString(raw[:5]))
	token = TokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(raw[5:])
	return token, id, HashToken(token)
}

// tokenID returns the ID of a token of NewToken's layout, and whether
// it has that layout.
func tokenID(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok || len(rest) <= idLength+1 || rest[idLength] != '_' {
		return "", false
	}
	return rest[:idLength], true
}

// HashToken returns the hash a user's token is stored as. Tokens carry
// 256 random bits (or, for the first admin, the data directory's random
// token), so a plain SHA-256 is as strong as a slow hash here.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
