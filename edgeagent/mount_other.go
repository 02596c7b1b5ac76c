//go:build !linux

package edgeagent

import (
	"errors"
	"fmt"
)

var errNoTmpfs = errors.New("emptyDir medium Memory needs Linux")

func mountTmpfs(dir string, _ int64) (bool, error) {
	return false, fmt.Errorf("mount tmpfs on %s: %w", dir, errNoTmpfs)
}

func unmountAll(string) error { return nil }

func isMounted(string) (bool, error) { return false, nil }
