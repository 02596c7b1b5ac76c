//go:build unix

package boltfile

import (
	"os"
	"syscall"
)

// releaseFile unlocks and closes a file that bbolt panicked on. Closing
// alone would keep the lock while bbolt's memory mapping holds the file.
func releaseFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}
