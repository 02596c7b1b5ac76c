package edgeagent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// An instance's update lock on the host: the directory
// DataDir/pods/{podUID}/update-lock, mounted at schema.UpdateLockDir in
// each of its containers, and in it the lock file, held while it exists.
// The directory is world-writable with the sticky bit, as /tmp is: a
// daemon of any user can take and release its lock, and none can remove
// a lock the agent took (it is root's).

// updateLockFileName is the lock file's name in the lock directory.
const updateLockFileName = "updates.lock"

// agentLockMark is the content of a lock the agent takes itself, before
// it stops an instance for an update: a daemon that takes its lock with
// an exclusive create then finds it taken, and the agent, restarted in
// the middle of an update, knows the lock for its own (balena's stale
// supervisor locks, balena-supervisor#1758, were locks its supervisor
// could not tell from the application's).
var agentLockMark = []byte("edgeset-agent update\n")

func updateLockDir(dataDir, podUID string) string {
	return filepath.Join(podDir(dataDir, podUID), "update-lock")
}

// lockState is what an instance's lock file says.
type lockState struct {
	// held: a daemon holds the lock, since its file's modification time.
	held  bool
	since time.Time
	// own: the file is the agent's own lock.
	own bool
}

// readLock reads the lock of the lock directory dir. A file that is not
// the agent's (of any type: a directory, a link) is a daemon's lock.
func readLock(dir string) (lockState, error) {
	path := filepath.Join(dir, updateLockFileName)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return lockState{}, nil
	case err != nil:
		return lockState{}, fmt.Errorf("read update lock %s: %w", path, err)
	}
	if fi.Mode().IsRegular() && fi.Size() == int64(len(agentLockMark)) && isAgentMark(path) {
		return lockState{own: true, since: fi.ModTime().UTC()}, nil
	}
	return lockState{held: true, since: fi.ModTime().UTC()}, nil
}

// isAgentMark reports whether the regular file at path holds the agent's
// mark. It opens the file without following a link or blocking on a
// pipe (the directory is the container's to write).
func isAgentMark(path string) bool {
	f, err := openNoFollow(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(len(agentLockMark))+1))
	return err == nil && bytes.Equal(b, agentLockMark)
}

// takeLock takes the lock of dir for the agent with an exclusive create,
// and reports whether the agent holds it now (it did, or took it).
func takeLock(dir string) (bool, error) {
	path := filepath.Join(dir, updateLockFileName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		st, err := readLock(dir)
		return st.own, err
	}
	if err != nil {
		return false, fmt.Errorf("take update lock %s: %w", path, err)
	}
	_, err = f.Write(agentLockMark)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("take update lock %s: %w", path, err)
	}
	return true, nil
}

// removeLock removes the lock file of dir, whatever it is (a link is
// removed, not followed).
func removeLock(dir string) error {
	path := filepath.Join(dir, updateLockFileName)
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove update lock %s: %w", path, err)
	}
	return nil
}

// prepareLockDir makes dir, world-writable with the sticky bit.
func prepareLockDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("update lock directory: %w", err)
	}
	if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
		return fmt.Errorf("update lock directory: %w", err)
	}
	return nil
}

// hasLockDir reports whether the instance of podUID has a lock
// directory: its template opts into the update lock.
func hasLockDir(dataDir, podUID string) bool {
	fi, err := os.Stat(updateLockDir(dataDir, podUID))
	return err == nil && fi.IsDir()
}
