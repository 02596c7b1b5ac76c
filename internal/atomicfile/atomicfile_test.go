package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWholeWithMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	require.NoError(t, Write(p, []byte("one\n"), 0o600))
	require.NoError(t, Write(p, []byte("two\n"), 0o600))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(b))
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	err = Write(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600)
	assert.ErrorContains(t, err, filepath.Join(dir, "missing", "x"), "the error names the file")
}
