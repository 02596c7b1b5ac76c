package selfupdate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edgeset-agent.trial")
	rec, err := ReadRecord(path)
	require.NoError(t, err)
	assert.Nil(t, rec, "no record")
	want := Record{State: StateTrial, From: Build{"v1", "sha256:" + hex64('1')}, To: Build{"v2", "sha256:" + hex64('2')},
		Revision: "r2", Attempts: 1, MaxAttempts: 3, DeadlineSeconds: 300}
	require.NoError(t, WriteRecord(path, want))
	got, err := ReadRecord(path)
	require.NoError(t, err)
	want.Format = RecordFormat
	assert.Equal(t, want, *got)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.NoError(t, RemoveRecord(path))
	require.NoError(t, RemoveRecord(path), "removing twice is fine")

	for name, body := range map[string]string{
		"future format": `{"format":2,"state":"trial","from":{"digest":"sha256:a"},"to":{"digest":"sha256:b"},"maxAttempts":1,"deadlineSeconds":1}`,
		"unknown state": `{"format":1,"state":"maybe","from":{"digest":"sha256:a"},"to":{"digest":"sha256:b"},"maxAttempts":1,"deadlineSeconds":1}`,
		"no deadline":   `{"format":1,"state":"trial","from":{"digest":"sha256:a"},"to":{"digest":"sha256:b"},"maxAttempts":1}`,
		"not json":      `{"format":`,
	} {
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		_, err := ReadRecord(path)
		assert.Error(t, err, name)
	}
}

// FuzzReadRecord: whatever is in the file, ReadRecord does not panic,
// and a record it accepts is valid and survives a write and a read.
func FuzzReadRecord(f *testing.F) {
	f.Add([]byte(`{"format":1,"state":"trial","from":{"version":"v1","digest":"sha256:a"},"to":{"version":"v2","digest":"sha256:b"},"attempts":1,"maxAttempts":3,"deadlineSeconds":60}`))
	f.Add([]byte(`{"format":1,"state":"rolledBack","reason":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "r.trial")
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		rec, err := ReadRecord(path)
		if err != nil || rec == nil {
			return
		}
		if err := rec.check(); err != nil {
			t.Fatalf("accepted an invalid record: %v", err)
		}
		if err := WriteRecord(path, *rec); err != nil {
			t.Fatal(err)
		}
		again, err := ReadRecord(path)
		if err != nil || *again != *rec {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, rec)
		}
	})
}
