package edgeagent

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs on dir (mode 0777, size sizeBytes, or the
// kernel's default of half the memory when 0) unless one is mounted there
// already; mounted reports that it mounted one now. Without the privilege
// to mount it fails with a clear reason.
func mountTmpfs(dir string, sizeBytes int64) (mounted bool, err error) {
	already, err := isMountPoint(dir)
	if err != nil || already {
		return false, err
	}
	opts := "mode=0777"
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	err = unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	if errors.Is(err, unix.EPERM) {
		return false, fmt.Errorf("mount tmpfs on %s: %w (medium Memory needs an agent allowed to mount: root or CAP_SYS_ADMIN)", dir, err)
	}
	if err != nil {
		return false, fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return true, nil
}

// unmountAll unmounts dir until it is no longer a mount point; a
// directory that is not one is left alone.
func unmountAll(dir string) error {
	for i := 0; i < 8; i++ {
		mounted, err := isMountPoint(dir)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", dir)
}

// isMountPoint reports whether dir is on another device than its parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	return st.Dev != parent.Dev, nil
}

// isMounted reports whether dir is a mount point (a tmpfs the agent mounted).
func isMounted(dir string) (bool, error) { return isMountPoint(dir) }
