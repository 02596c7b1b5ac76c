package edgeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/edgeset/edgeset/schema"
)

// prepareHostPath applies a hostPath volume's type as the kubelet does:
// DirectoryOrCreate creates a missing directory (0755, parents too),
// FileOrCreate a missing empty file (0644; its parent must exist), and
// every type then checks what the path is, following symlinks. The empty
// type checks nothing, and a missing path is created as a directory
// (0755): the kubelet leaves that to the container runtime, and
// containerd, CRI-O and Docker's -v all create it, where Docker's mount API
// would refuse the container ("bind source path does not exist").
func prepareHostPath(path, typ string) error {
	switch typ {
	case schema.HostPathUnset:
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return fmt.Errorf("hostPath: create missing %s: %w", path, err)
			}
		}
		return nil
	case schema.HostPathDirectoryOrCreate:
		if !exists(path) {
			return makeDir(path)
		}
		return checkHostPathType(path, schema.HostPathDirectory)
	case schema.HostPathFileOrCreate:
		if !exists(path) {
			return makeFile(path)
		}
		return checkHostPathType(path, schema.HostPathFile)
	}
	return checkHostPathType(path, typ)
}

// checkHostPathType checks an existing path against a type, with the
// kubelet's messages.
func checkHostPathType(path, typ string) error {
	info, err := os.Stat(path)
	mode := fs.FileMode(0)
	if err == nil {
		mode = info.Mode()
	}
	var ok bool
	var what string
	switch typ {
	case schema.HostPathDirectory:
		ok, what = err == nil && mode.IsDir(), "a directory"
	case schema.HostPathFile:
		ok, what = err == nil && mode.IsRegular(), "a file"
	case schema.HostPathSocket:
		ok, what = err == nil && mode&fs.ModeSocket != 0, "a socket file"
	case schema.HostPathCharDevice:
		ok, what = err == nil && mode&fs.ModeCharDevice != 0, "a character device"
	case schema.HostPathBlockDevice:
		ok, what = err == nil && mode&fs.ModeDevice != 0 && mode&fs.ModeCharDevice == 0, "a block device"
	default:
		return fmt.Errorf("%s is an invalid volume type", typ)
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not %s", path, what)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func makeDir(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return fmt.Errorf("hostPath DirectoryOrCreate: %w", err)
	}
	return nil
}

// makeFile creates an empty file; a missing parent is an error, as in
// Kubernetes.
func makeFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("hostPath FileOrCreate: %w", err)
	}
	if f != nil {
		return f.Close()
	}
	return nil
}
