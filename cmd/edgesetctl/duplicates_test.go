package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLIApplyRefusesAnObjectInTwoFiles: apply -f DIR (or several -f)
// sends one request per file, so the controller's rule that an object is
// declared once per request never saw the same daemonset in two files:
// each apply configured it twice, one file's spec then the other's, two
// generations and a rollout back and forth every time. edgesetctl reads
// every file first and refuses, naming both places, before anything is
// sent; diff and delete -f read files the same way.
func TestCLIApplyRefusesAnObjectInTwoFiles(t *testing.T) {
	c := startFleet(t, 0)
	dir := t.TempDir()
	for name, image := range map[string]string{"a.yaml": "busybox:a", "b.yaml": "busybox:b"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: flip, namespace: default}
spec:
  selector: {matchLabels: {app: flip}}
  template:
    metadata: {labels: {app: flip}}
    spec: {containers: [{name: c, image: "`+image+`"}]}
`), 0o644))
	}
	for _, tc := range []struct {
		args []string
		code int // diff exits 2 on an error, as kubectl diff does
	}{
		{[]string{"apply", "-f", dir}, 1},
		{[]string{"apply", "-f", filepath.Join(dir, "a.yaml"), "-f", filepath.Join(dir, "b.yaml")}, 1},
		{[]string{"diff", "-f", dir}, 2},
	} {
		args := tc.args
		code, out, errOut := c.run(args...)
		assert.Equal(t, tc.code, code, "%v: stdout %s", args, out)
		assert.Contains(t, errOut, filepath.Join(dir, "b.yaml")+":1: metadata.name: daemonset/default/flip is declared twice, here and at "+
			filepath.Join(dir, "a.yaml")+":1", "%v", args)
	}
	code, out, _ := c.run("get", "ds", "flip")
	assert.NotEqual(t, 0, code, "nothing applied: %s", out)
}
