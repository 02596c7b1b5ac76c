//go:build !unix

package store

import "os"

// releaseFile closes a file that bbolt panicked on.
func releaseFile(f *os.File) { _ = f.Close() }
