package edgeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWrittenVolumesSkipUnchangedPayloads: the agent's pass over an
// unchanged config volume reads none of its files (it would read every
// file of a ConfigMap of 100,000 keys on every pass), and still compares
// in full whatever it has not seen itself: after a restart, or when ..data
// names another version.
func TestWrittenVolumesSkipUnchangedPayloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pods", "uid", "volumes", volumeKindConfigMap, "v")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v1 := map[string]fileProjection{"a.conf": {Data: []byte("1"), Mode: 0o644}}
	read := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "a.conf"))
		require.NoError(t, err)
		return string(b)
	}
	// Stands for a file the pass would have to read: changed behind the
	// writer's back, so a comparison would rewrite it.
	tamper := func() {
		ts, err := os.Readlink(filepath.Join(dir, dataDirName))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, ts, "a.conf"), []byte("x"), 0o644))
	}

	w := newWrittenVolumes()
	require.NoError(t, w.write(dir, v1, nil, t0))
	tamper()
	require.NoError(t, w.write(dir, v1, nil, t0.Add(time.Minute)))
	assert.Equal(t, "x", read(), "an unchanged payload is not compared again")

	require.NoError(t, newWrittenVolumes().write(dir, v1, nil, t0.Add(2*time.Minute)))
	assert.Equal(t, "1", read(), "a restarted agent compares in full")

	require.NoError(t, w.write(dir, map[string]fileProjection{"a.conf": {Data: []byte("2"), Mode: 0o644}}, nil, t0.Add(3*time.Minute)))
	assert.Equal(t, "2", read(), "a changed payload is written")
	require.NoError(t, w.write(dir, v1, nil, t0.Add(4*time.Minute)))
	assert.Equal(t, "1", read())

	w.retain(map[string]bool{})
	tamper()
	require.NoError(t, w.write(dir, v1, nil, t0.Add(5*time.Minute)))
	assert.Equal(t, "1", read(), "a removed instance's volumes are forgotten")
}
