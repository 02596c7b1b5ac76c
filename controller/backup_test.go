package controller

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
)

// TestBackupThroughAPIRestores: the running controller sends a consistent
// copy of its store to an authenticated client only; a controller started
// on the copy knows what the first one held.
func TestBackupThroughAPIRestores(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	ctx := context.Background()

	resp, err := http.Get("http://" + tc.APIAddr().String() + "/api/v1/backup")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a backup needs the admin token")

	var buf bytes.Buffer
	n, err := tc.api.Backup(ctx, &buf)
	require.NoError(t, err)
	assert.EqualValues(t, buf.Len(), n)
	tc.stop()

	dir := t.TempDir()
	path := filepath.Join(dir, "edgeset.db")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	require.NoError(t, store.Verify(path))
	restored := startController(t, Config{DataDir: dir})
	ds, err := restored.api.GetDaemonSet(ctx, "monitoring/exporter")
	require.NoError(t, err)
	assert.Equal(t, "registry.local/exporter:1.0", ds.Manifest.Spec.Template.Spec.Containers[0].Image)

	var none bytes.Buffer
	_, err = api.NewClient("http://"+restored.APIAddr().String(), "wrong", nil).Backup(ctx, &none)
	require.ErrorIs(t, err, api.ErrUnauthorized)
	assert.Zero(t, none.Len())
}
