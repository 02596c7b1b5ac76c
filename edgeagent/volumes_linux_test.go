package edgeagent

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func fileGID(t *testing.T, info fs.FileInfo) uint32 {
	t.Helper()
	st, ok := info.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	return st.Gid
}

func TestWriteAtomicFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	dir := filepath.Join(t.TempDir(), "vol")
	gid := int64(4321)
	_, err := writeAtomic(dir, map[string]fileProjection{"s/key": {Data: []byte("x"), Mode: 0o400}}, &gid, time.Now())
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir, "s", "key"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o440), info.Mode().Perm(), "group-readable, as the kubelet's fsGroup")
	assert.Equal(t, uint32(gid), fileGID(t, info))
	dinfo, err := os.Stat(filepath.Join(dir, "s"))
	require.NoError(t, err)
	assert.NotZero(t, dinfo.Mode()&fs.ModeSetgid)
}

func TestMemoryEmptyDirIsATmpfs(t *testing.T) {
	dataDir := t.TempDir()
	dir := volumeDir(dataDir, "uid-1", volumeKindEmptyDir, "mem")
	size := schema.Quantity("1Mi")
	err := prepareEmptyDir(dir, schema.EmptyDirVolumeSource{Medium: schema.StorageMediumMemory, SizeLimit: &size}, nil)
	if err != nil {
		require.ErrorContains(t, err, "mount tmpfs on "+dir)
		t.Skipf("this test process may not mount: %v", err)
	}
	t.Cleanup(func() { _ = unmountAll(dir) })
	mounted, err := isMountPoint(dir)
	require.NoError(t, err)
	assert.True(t, mounted)
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	assert.Equal(t, int64(1<<20), int64(st.Blocks)*st.Bsize, "sizeLimit")
	require.NoError(t, prepareEmptyDir(dir, schema.EmptyDirVolumeSource{Medium: schema.StorageMediumMemory, SizeLimit: &size}, nil), "idempotent")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644))

	require.NoError(t, removePodFiles(dataDir, "uid-1"))
	assert.NoDirExists(t, podDir(dataDir, "uid-1"))
}
