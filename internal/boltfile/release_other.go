//go:build !unix

package boltfile

import "os"

// releaseFile closes a file that bbolt panicked on.
func releaseFile(f *os.File) { _ = f.Close() }
