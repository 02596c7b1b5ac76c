package controller

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/audit"
	"github.com/edgeset/edgeset/controller/store"
)

// TestUpgradeKeepsTheAdminToken: a data directory from before users (a
// store without any, an admin.token) starts with that token as user
// admin's; users and the audit log survive a restart.
func TestUpgradeKeepsTheAdminToken(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir}
	st, err := store.Open(cfg.storePath(), store.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	const legacy = "0123456789abcdef0123456789abcdef-legacy"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "admin.token"), []byte(legacy+"\n"), 0o600))

	tc := startController(t, Config{DataDir: dir})
	ctx := context.Background()
	admin := api.NewClient("http://"+tc.APIAddr().String(), legacy, nil)
	me, err := admin.WhoAmI(ctx)
	require.NoError(t, err, "the token of before works")
	assert.Equal(t, "admin", me.Name)
	assert.Equal(t, "admin", me.Role)
	created, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: "ops", Role: "operator"})
	require.NoError(t, err)
	tc.applyYAML(t, exporterYAML)
	tc.stop()

	again := startController(t, Config{DataDir: dir})
	ops := api.NewClient("http://"+again.APIAddr().String(), created.Token, nil)
	me, err = ops.WhoAmI(ctx)
	require.NoError(t, err, "users survive a restart")
	assert.Equal(t, "ops", me.Name)
	entries, err := api.NewClient("http://"+again.APIAddr().String(), legacy, nil).Audit(ctx, audit.Filter{})
	require.NoError(t, err)
	require.Len(t, entries, 2, "the user creation and the apply, across the restart")
	assert.Equal(t, "/api/v1/users", entries[0].Path)
	assert.Equal(t, "POST", entries[1].Method)
	assert.Equal(t, 200, entries[1].Status)
}
