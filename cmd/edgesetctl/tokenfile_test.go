package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLIEmptyTokenFile: an empty (or blank) token file is refused naming
// the file, before anything is sent; it used to send "Bearer " and report
// that the controller refused the token.
func TestCLIEmptyTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	var out, errb bytes.Buffer
	code := run([]string{"--server", "http://127.0.0.1:1", "--token-file", path, "get", "nodes"}, strings.NewReader(""), &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "token file (--token-file "+path+") is empty")
	assert.NotContains(t, errb.String(), "unreachable", "refused before connecting")
}
