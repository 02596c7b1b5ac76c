package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

const backupDS = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: edge}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "agent:1"}]
`

// seedStore writes a store holding one daemonset in dataDir.
func seedStore(t *testing.T, dataDir string) {
	t.Helper()
	s, err := store.Open(filepath.Join(dataDir, "edgeset.db"), store.Options{})
	require.NoError(t, err)
	objs, _, err := schema.Decode("ds.yaml", []byte(backupDS))
	require.NoError(t, err)
	_, _, err = s.PutDaemonSet(objs[0].DaemonSet, time.Now())
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// restoredKeys opens a backup as a restored store and lists its
// daemonsets.
func restoredKeys(t *testing.T, backup string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeset.db")
	data, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	s, err := store.Open(path, store.Options{})
	require.NoError(t, err)
	defer s.Close()
	recs, err := s.ListDaemonSets()
	require.NoError(t, err)
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key())
	}
	return keys
}

// TestBackupOffline: `backup --offline` copies a stopped controller's
// store, and refuses a store a controller holds, pointing at the online
// backup.
func TestBackupOffline(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir)
	out := filepath.Join(t.TempDir(), "copy.db")
	cmd := newRootCmd(io.Discard)
	cmd.SetArgs([]string{"backup", "--offline", "--data-dir", dir, "--out", out})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, []string{"edge/agent"}, restoredKeys(t, out))
	fi, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a backup holds Secrets")

	held, err := store.Open(filepath.Join(dir, "edgeset.db"), store.Options{})
	require.NoError(t, err)
	defer held.Close()
	err = runBackup(context.Background(), backupOptions{offline: true, dataDir: dir, out: filepath.Join(t.TempDir(), "x.db")}, io.Discard)
	require.ErrorIs(t, err, store.ErrLocked)
	assert.Contains(t, err.Error(), "back it up through its API")
}

// TestBackupOnline: `backup` asks the running controller for the copy; a
// failed backup leaves no file.
func TestBackupOnline(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir)
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	out := filepath.Join(t.TempDir(), "copy.db")
	var stdout bytes.Buffer
	o := backupOptions{server: "http://" + c.APIAddr().String(), dataDir: dir, out: out}
	require.NoError(t, runBackup(ctx, o, &stdout))
	assert.Contains(t, stdout.String(), "backed up the store to "+out)
	assert.Equal(t, []string{"edge/agent"}, restoredKeys(t, out))

	bad := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(bad, []byte("wrong\n"), 0o600))
	failed := filepath.Join(t.TempDir(), "failed.db")
	o.tokenFile, o.out = bad, failed
	require.ErrorContains(t, runBackup(ctx, o, io.Discard), "refused the API token")
	entries, err := os.ReadDir(filepath.Dir(failed))
	require.NoError(t, err)
	assert.Empty(t, entries, "a failed backup leaves nothing behind")
}

// TestBackupEmptyTokenFile: an empty token file is refused naming it,
// before the controller is asked (it used to be sent as an empty bearer
// token and reported as refused).
func TestBackupEmptyTokenFile(t *testing.T) {
	token := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(token, []byte("\n"), 0o600))
	o := backupOptions{server: "http://127.0.0.1:1", tokenFile: token, out: filepath.Join(t.TempDir(), "x.db")}
	err := runBackup(context.Background(), o, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "API token file "+token+" is empty")
}
