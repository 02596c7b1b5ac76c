//go:build linux || darwin || freebsd

package store

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Available returns the bytes the store's file system has free for it,
// and false if that cannot be told.
func (s *Store) Available() (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(s.path), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
