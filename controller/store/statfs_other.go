//go:build !(linux || darwin || freebsd)

package store

// Available returns the bytes the store's file system has free for it,
// and false if that cannot be told (not on this system).
func (s *Store) Available() (int64, bool) { return 0, false }
