//go:build !unix

package edgeagent

import "os"

// openNoFollow opens path for reading (the caller checked it is a
// regular file).
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }
