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

// TestDiffErrorExitCode: as kubectl diff, 1 means differences were found
// and an error exits above 1, so that a CI gate treating 1 as drift does
// not take a missing file, an invalid manifest or an unreachable
// controller for drift.
func TestDiffErrorExitCode(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	require.NoError(t, os.WriteFile(invalid, []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {}\n"), 0o600))
	valid := manifest(t, "exporter:1")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"missing file":       {[]string{"diff", "-f", filepath.Join(dir, "missing.yaml")}, "no such file"},
		"invalid manifest":   {[]string{"diff", "-f", invalid}, "spec.selector: required"},
		"controller refused": {[]string{"--server", "http://127.0.0.1:1", "--token", "x", "diff", "-f", valid}, "unreachable"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &out, &errb)
			assert.Equal(t, 2, code, errb.String())
			assert.Contains(t, errb.String(), tc.want)
		})
	}
}
