package access

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Store keeps users durably; the controller's store implements it.
type Store interface {
	// ListUsers returns every stored user.
	ListUsers() ([]User, error)
	// PutUser stores u under u.Name, replacing any user of that name.
	PutUser(u User) error
	// DeleteUser removes the user name; ErrNotFound-like errors are the
	// store's own.
	DeleteUser(name string) error
}

// BootstrapAdmin is the name of the first admin user, made from the data
// directory's admin token (admin.token) when the store holds no user.
const BootstrapAdmin = "admin"

// ErrLastAdmin refuses to revoke the last unscoped admin: nobody could
// manage users any more.
var ErrLastAdmin = errors.New("last admin")

// Users is the controller's user table: in memory for authentication,
// written through to a Store. Safe for concurrent use; it is the only
// writer of the users in its Store.
type Users struct {
	store Store
	lim   Limits
	now   func() time.Time

	mu     sync.RWMutex      // guards byName and byID
	byName map[string]User   // every user
	byID   map[string]string // TokenID -> name, for every user with one
}

// NewUsers loads the users of store, and makes BootstrapAdmin an
// unscoped, unexpiring admin whose token is bootstrapToken (the data
// directory's admin.token) unless it already is. So an upgraded
// controller keeps accepting the token its operators hold, a store
// restored into another data directory answers that directory's token,
// and whoever holds the data directory (and with it the fleet secret
// and the store) always has a way in. "" skips it.
func NewUsers(store Store, lim Limits, bootstrapToken string, now func() time.Time) (*Users, error) {
	if now == nil {
		now = time.Now
	}
	u := &Users{store: store, lim: lim.withDefaults(), now: now, byName: map[string]User{}, byID: map[string]string{}}
	list, err := store.ListUsers()
	if err != nil {
		return nil, fmt.Errorf("load users: %w", err)
	}
	for _, usr := range list {
		u.addLocked(usr)
	}
	old, had := u.byName[BootstrapAdmin]
	hash := HashToken(bootstrapToken)
	if bootstrapToken != "" && (!had || old.Role != RoleAdmin || old.Namespace != "" || !old.ExpiresAt.IsZero() ||
		subtle.ConstantTimeCompare(old.TokenHash, hash) != 1) {
		admin := User{Name: BootstrapAdmin, Role: RoleAdmin, TokenHash: hash, CreatedAt: now().UTC()}
		if err := store.PutUser(admin); err != nil {
			return nil, fmt.Errorf("create the first admin user %q from the admin token: %w", BootstrapAdmin, err)
		}
		u.addLocked(admin)
	}
	return u, nil
}

// addLocked adds usr to the tables (mu held, or not yet shared).
func (u *Users) addLocked(usr User) {
	u.byName[usr.Name] = usr
	if usr.TokenID != "" {
		u.byID[usr.TokenID] = usr.Name
	}
}

// Authenticate returns the user whose token is token. A token of
// NewToken's layout finds its user by its ID; any other can only be the
// first admin's (admin.token). Either way the token's hash is compared
// with the user's in constant time, so the time taken says nothing about
// how close a guess came, and is independent of the number of users.
// An expired user is ErrUnauthenticated, as is an unknown token.
func (u *Users) Authenticate(token string) (User, error) {
	h := HashToken(token)
	u.mu.RLock()
	defer u.mu.RUnlock()
	name := BootstrapAdmin
	if id, ok := tokenID(token); ok {
		if name, ok = u.byID[id]; !ok {
			return User{}, fmt.Errorf("%w: no user holds this token", ErrUnauthenticated)
		}
	}
	found, ok := u.byName[name]
	switch {
	case !ok || subtle.ConstantTimeCompare(h, found.TokenHash) != 1:
		return User{}, fmt.Errorf("%w: no user holds this token", ErrUnauthenticated)
	case found.Expired(u.now()):
		return User{}, fmt.Errorf("%w: the token of user %q expired at %s", ErrUnauthenticated, found.Name, found.ExpiresAt.Format(time.RFC3339))
	}
	return found, nil
}

// Create makes a user from s, created by by, and returns it with its
// token: the only time the token is known.
func (u *Users) Create(s Spec, by string) (User, string, error) {
	if err := s.Validate(u.lim); err != nil {
		return User{}, "", err
	}
	token, id, hash := NewToken()
	now := u.now().UTC()
	usr := User{Name: s.Name, Role: s.Role, Namespace: s.Namespace, TokenID: id, TokenHash: hash, CreatedAt: now, CreatedBy: by}
	if s.TTL > 0 {
		usr.ExpiresAt = now.Add(s.TTL)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.byName[s.Name]; ok {
		return User{}, "", fmt.Errorf("%w: user %q exists (revoke it first to issue a new token)", ErrExists, s.Name)
	}
	if len(u.byName) >= u.lim.MaxUsers {
		return User{}, "", fmt.Errorf("%w: %d users exist, the limit (user-max) is %d; revoke one first", ErrTooMany, len(u.byName), u.lim.MaxUsers)
	}
	if _, dup := u.byID[id]; dup { // 40 random bits: never in practice
		return User{}, "", fmt.Errorf("token ID collision; create the user again")
	}
	if err := u.store.PutUser(usr); err != nil {
		return User{}, "", fmt.Errorf("store user %q: %w", s.Name, err)
	}
	u.addLocked(usr)
	return usr, token, nil
}

// Revoke deletes the user name; its token stops working at once. The
// last unscoped, unexpired admin cannot be revoked.
func (u *Users) Revoke(name string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	usr, ok := u.byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if name == BootstrapAdmin {
		return fmt.Errorf("%w: user %q is the data directory's admin token (admin.token); "+
			"to change its token, replace that file and restart the controller", ErrLastAdmin, name)
	}
	if u.isLastAdminLocked(usr) {
		return fmt.Errorf("%w: user %q is the last admin; create another admin before revoking it", ErrLastAdmin, name)
	}
	if err := u.store.DeleteUser(name); err != nil {
		return fmt.Errorf("delete user %q: %w", name, err)
	}
	delete(u.byName, name)
	delete(u.byID, usr.TokenID)
	return nil
}

func (u *Users) isLastAdminLocked(usr User) bool {
	if usr.Role != RoleAdmin || usr.Namespace != "" {
		return false
	}
	now := u.now()
	for _, o := range u.byName {
		if o.Name != usr.Name && o.Role == RoleAdmin && o.Namespace == "" && !o.Expired(now) {
			return false
		}
	}
	return true
}

// List returns every user, sorted by name.
func (u *Users) List() []User {
	u.mu.RLock()
	defer u.mu.RUnlock()
	out := make([]User, 0, len(u.byName))
	for _, usr := range u.byName {
		out = append(out, usr)
	}
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Len returns how many users exist.
func (u *Users) Len() int {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return len(u.byName)
}
