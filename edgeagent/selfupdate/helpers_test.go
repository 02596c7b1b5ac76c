package selfupdate

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeAgent writes at path a runnable stand-in for an agent binary of
// version: a shell script that answers `version --json` as an agent of
// this platform does (selfUpgrade overrides the format it claims), and
// returns its build.
func fakeAgent(t *testing.T, path, version string, selfUpgrade int) Build {
	t.Helper()
	info, err := json.Marshal(VersionInfo{Version: version, Platform: Platform(), SelfUpgrade: selfUpgrade})
	require.NoError(t, err)
	script := fmt.Sprintf("#!/bin/sh\n# agent %s\nif [ \"$1\" = version ]; then echo '%s'; exit 0; fi\nexit 3\n", version, info)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	d, err := fileDigest(path)
	require.NoError(t, err)
	return Build{Version: version, Digest: d}
}

// versionAt runs the binary at path as the service manager would start
// it after a crash, and returns the version it reports: the test's proof
// that a runnable agent is in place.
func versionAt(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path, "version", "--json").Output()
	require.NoError(t, err, "the binary at %s does not run", path)
	var info VersionInfo
	require.NoError(t, json.Unmarshal(out, &info))
	return info.Version
}

// restart is a start of whatever binary is at p.Binary, as after a
// restart by the service manager.
func restart(t *testing.T, p Paths) (Boot, error) {
	t.Helper()
	return start(swapper{p: p}, func() (string, error) { return fileDigest(p.Binary) }, quietLog())
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func removeFile(path string) error { return os.Remove(path) }

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
