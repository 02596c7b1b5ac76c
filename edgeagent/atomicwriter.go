package edgeagent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fileProjection is one file of a volume's payload.
type fileProjection struct {
	Data []byte
	Mode int32
}

// Names inside a volume written by writeAtomic, as the kubelet's
// AtomicWriter names them.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// writeAtomic makes dir hold exactly payload (relative path to file) the
// way the kubelet's AtomicWriter does, so that a reader never sees half of
// an update:
//
//	dir/..2026_01_02_03_04_05.123456789/<path>   the files of this version
//	dir/..data -> ..2026_01_02_03_04_05.123456789
//	dir/<top>  -> ..data/<top>                   one per top-level path
//
// A new version is written into a new timestamped directory, ..data is
// swapped to it with a rename, the visible links are added or removed, and
// the previous version's directory is removed. With fsGroup, every file
// and directory of the version is group-owned by fsGroup and
// group-readable (directories setgid and group-searchable), as the
// kubelet's SetVolumeOwnership does for a read-only volume. A payload equal
// to what dir holds writes no new version; written reports whether it
// wrote one.
//
// Every call also finishes what an interrupted one (the agent killed
// between any two steps) left: version directories other than the one
// ..data names are removed and the visible links are made to match the
// payload, so a crash after the swap cannot leave a key invisible.
func writeAtomic(dir string, payload map[string]fileProjection, fsGroup *int64, now time.Time) (written bool, err error) {
	if err := validatePayload(payload); err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	oldTs, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if oldTs != "" && payloadMatches(filepath.Join(dir, oldTs), payload) {
		return false, syncDir(dir, oldTs, payload)
	}
	tsDir, err := os.MkdirTemp(dir, now.UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := writeVersion(tsDir, payload, fsGroup); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	if err := swapDataDir(dir, filepath.Base(tsDir)); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	return true, syncDir(dir, filepath.Base(tsDir), payload)
}

// validatePayload refuses paths that are absolute, leave the volume, or
// begin with "..", which the writer reserves for itself.
func validatePayload(payload map[string]fileProjection) error {
	for p := range payload {
		if p == "" || filepath.IsAbs(p) || !filepath.IsLocal(p) || filepath.Clean(p) != p {
			return fmt.Errorf("invalid file path %q: must be a clean relative path inside the volume", p)
		}
		if strings.HasPrefix(p, "..") {
			return fmt.Errorf("invalid file path %q: must not start with '..'", p)
		}
	}
	return nil
}

// payloadMatches reports whether tsDir holds exactly the payload's files
// with the same content (modes are fixed by the template, which cannot
// change under one instance uid).
func payloadMatches(tsDir string, payload map[string]fileProjection) bool {
	seen := 0
	err := filepath.WalkDir(tsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tsDir, p)
		want, ok := payload[rel]
		if !ok {
			return errors.New("extra file")
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want.Data) {
			return errors.New("differs")
		}
		seen++
		return nil
	})
	return err == nil && seen == len(payload)
}

func writeVersion(tsDir string, payload map[string]fileProjection, fsGroup *int64) error {
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	for _, p := range sortedKeys(payload) {
		f := payload[p]
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode := fs.FileMode(f.Mode) & fs.ModePerm
		if err := os.WriteFile(full, f.Data, mode); err != nil {
			return err
		}
		if err := os.Chmod(full, mode); err != nil { // the umask may have cut bits
			return err
		}
	}
	if fsGroup != nil {
		return setGroupOwnership(tsDir, *fsGroup, true)
	}
	return nil
}

// swapDataDir points dir/..data at tsName atomically.
func swapDataDir(dir, tsName string) error {
	tmp := filepath.Join(dir, newDataDirName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(tsName, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, dataDirName))
}

// syncDir makes dir's entries match the version current: it removes every
// entry the writer owns (its name begins with "..") except ..data and
// current (the previous version, and whatever an interrupted write left: a
// half-written version, a ..data_tmp link), removes every visible entry
// that is not the link of a top-level payload path (a name no longer in
// the payload, or a directory made for a subPath mount of a key that did
// not exist yet), and creates the missing links dir/<top> -> ..data/<top>.
// One directory read: a volume of 100,000 keys is synced in one pass
// without a system call per key when nothing changed.
func syncDir(dir, current string, payload map[string]fileProjection) error {
	tops := map[string]bool{}
	for p := range payload {
		top, _, _ := strings.Cut(p, string(filepath.Separator))
		tops[top] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	linked := make(map[string]bool, len(tops))
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dataDirName || name == current:
			continue
		case !strings.HasPrefix(name, "..") && tops[name] && e.Type()&fs.ModeSymlink != 0:
			linked[name] = true // only the writer makes links here: its own
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	for _, top := range sortedKeys(tops) {
		if linked[top] {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, top), filepath.Join(dir, top)); err != nil {
			return err
		}
	}
	return nil
}

// Masks of the kubelet's SetVolumeOwnership.
const (
	ownershipRWMask   fs.FileMode = 0o660
	ownershipROMask   fs.FileMode = 0o440
	ownershipExecMask fs.FileMode = 0o110
)

// setGroupOwnership gives every entry under root the group gid and the
// kubelet's fsGroup permissions: group read (and write unless readOnly);
// directories also setgid and group-searchable. Symlinks are re-owned but
// not re-moded.
func setGroupOwnership(root string, gid int64, readOnly bool) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return fmt.Errorf("fsGroup %d: %w", gid, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mask := ownershipRWMask
		if readOnly {
			mask = ownershipROMask
		}
		mode := info.Mode()
		if info.IsDir() {
			mode |= fs.ModeSetgid | ownershipExecMask
		}
		return os.Chmod(p, mode&(fs.ModePerm|fs.ModeSetgid)|mask)
	})
}
