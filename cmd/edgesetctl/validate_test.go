package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// TestValidateGolden runs edgesetctl end to end and compares its exit code,
// standard output and standard error with testdata/golden/NAME.golden.
func TestValidateGolden(t *testing.T) {
	stdinMulti, err := os.ReadFile("testdata/in/stdin-multi.yaml")
	require.NoError(t, err)
	tests := []struct {
		name  string
		args  []string
		stdin []byte
		exit  int
	}{
		{"valid-files", []string{"validate", "-f", "testdata/in/valid/fluentd-elasticsearch.yaml", "-f", "testdata/in/valid/node-exporter.yaml"}, nil, exitOK},
		{"valid-dir", []string{"validate", "-f", "testdata/in/valid"}, nil, exitOK},
		{"invalid-dir", []string{"validate", "-f", "testdata/in/invalid"}, nil, exitFailure},
		{"stdin", []string{"validate", "-f", "-"}, stdinMulti, exitFailure},
		{"stdin-and-file", []string{"validate", "-f", "testdata/in/valid/fluentd-elasticsearch.yaml", "-f", "-"}, []byte(strings.Split(string(stdinMulti), "---")[0]), exitOK},
		{"missing-file", []string{"validate", "-f", "testdata/in/nope.yaml"}, nil, exitFailure},
		{"lossy", []string{"validate", "-f", "testdata/in/strict"}, nil, exitOK},
		{"lossy-strict", []string{"validate", "--strict", "-f", "testdata/in/strict"}, nil, exitFailure},
		{"valid-strict", []string{"validate", "--strict", "-f", "testdata/in/valid"}, nil, exitOK},
		{"empty-dir", []string{"validate", "-f", "testdata/in/empty"}, nil, exitFailure},
		{"empty-stdin", []string{"validate", "-f", "-"}, []byte("# nothing\n"), exitFailure},
		{"syntax-error", []string{"validate", "-f", "-"}, []byte("kind: DaemonSet\n  bad: [\n"), exitFailure},
		{"no-filename", []string{"validate"}, nil, exitUsage},
		{"unknown-flag", []string{"validate", "--output", "json"}, nil, exitUsage},
		{"unknown-command", []string{"frobnicate"}, nil, exitUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, bytes.NewReader(tc.stdin), &stdout, &stderr)
			assert.Equal(t, tc.exit, code, "exit code; stderr:\n%s", stderr.String())
			got := fmt.Sprintf("$ edgesetctl %s\nexit %d\n--- stdout\n%s--- stderr\n%s",
				strings.Join(tc.args, " "), code, stdout.String(), stderr.String())
			golden := filepath.Join("testdata", "golden", tc.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update to create %s", golden)
			assert.Equal(t, string(want), got)
		})
	}
}

func TestRootCommandHasValidate(t *testing.T) {
	root := newRootCmd(&streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}})
	cmd, _, err := root.Find([]string{"validate"})
	require.NoError(t, err)
	assert.Equal(t, "validate", cmd.Name())
	assert.NotNil(t, cmd.Flags().ShorthandLookup("f"))
}
