package edgeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// prepareHostPathVolume checks a hostPath volume against the policy
// before creating anything for it, prepares it (prepareHostPath), and
// returns the path it resolves to now, every symlink of every component
// resolved and checked again: the bind source to give the engine, so
// that nothing swapped into the manifest's path after the check (a
// container that may write an allowed directory can plant a symlink
// there) is followed at mount time.
func prepareHostPathVolume(policy LocalPolicy, hp schema.HostPathVolumeSource) (string, error) {
	if err := policy.checkResolvedHostPath(hp.Path); err != nil {
		return "", err
	}
	if err := prepareHostPath(hp.Path, hp.Type); err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(hp.Path)
	if err != nil {
		return "", fmt.Errorf("hostPath %s: %w", hp.Path, err)
	}
	if err := policy.checkResolvedHostPath(resolved); err != nil {
		return "", fmt.Errorf("hostPath %s: %w", hp.Path, err)
	}
	return resolved, nil
}

// checkHostPathVolume is prepareHostPathVolume for an agent without a
// data dir, which creates nothing: with RestrictHostPaths it checks where
// the path resolves and returns that (the path as written if it does not
// exist yet, for the engine to refuse); without, the path as written.
func checkHostPathVolume(policy LocalPolicy, hp schema.HostPathVolumeSource) (string, error) {
	if !policy.RestrictHostPaths {
		return hp.Path, nil
	}
	if err := policy.checkResolvedHostPath(hp.Path); err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(hp.Path); err == nil {
		return resolved, nil
	}
	return hp.Path, nil
}

// checkResolvedHostPath applies RestrictHostPaths to where hostPath lies
// on this host: with every symlink of its existing part resolved, it must
// still be beneath one of the allowed prefixes (resolved too, so that an
// allowed /var/run covers /run). Check compares the manifest's path only,
// and a container that may write an allowed directory can plant a symlink
// in it to anywhere, which the engine's bind and DirectoryOrCreate or
// FileOrCreate would follow. A dangling symlink is refused: creating the
// path would create its target.
func (p LocalPolicy) checkResolvedHostPath(hostPath string) error {
	if !p.RestrictHostPaths {
		return nil
	}
	if hasDotDot(hostPath) {
		// resolveExisting cleans lexically first, but the kernel (and so
		// the DirectoryOrCreate or FileOrCreate that follows) resolves
		// "link/.." to the parent of link's target.
		return fmt.Errorf("hostPath %s: must not contain '..'", hostPath)
	}
	resolved, err := resolveExisting(hostPath)
	if err != nil {
		return fmt.Errorf("hostPath %s: %w", hostPath, err)
	}
	allowed := LocalPolicy{RestrictHostPaths: true}
	for _, prefix := range p.AllowedHostPaths {
		if r, err := resolveExisting(prefix); err == nil {
			allowed.AllowedHostPaths = append(allowed.AllowedHostPaths, r)
		}
	}
	if !allowed.hostPathAllowed(resolved) {
		return fmt.Errorf("hostPath %s resolves to %s, outside the allowed host paths", hostPath, resolved)
	}
	return nil
}

// hasDotDot reports whether p has a ".." component.
func hasDotDot(p string) bool { return slices.Contains(strings.Split(p, "/"), "..") }

// resolveExisting returns the absolute path p names once the symlinks of
// its longest existing prefix are resolved, a dangling symlink to where
// it points (creating the path would create its target); the missing rest
// is appended as written.
func resolveExisting(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for hops := 0; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if target, lerr := os.Readlink(p); lerr == nil {
			if hops++; hops > 40 {
				return "", fmt.Errorf("%s: too many levels of symbolic links", p)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			p = filepath.Clean(target)
			continue
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
