// Package atomicfile replaces files whole: a reader, or a crash at any
// moment, sees the old content or the new, never a part.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data through a synced temporary file in the
// same directory, created with mode perm (0600 for a secret), and syncs
// the directory so the rename survives a crash. A file that already holds
// data is left alone.
func Write(path string, data []byte, perm os.FileMode) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == string(data) {
		return nil
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
