package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// TestApplyRefusesDuplicateObjects: the same object (kind, namespace,
// name) twice in one request is refused, naming both places, and nothing
// of the request is applied; the same name in another kind or namespace is
// another object.
func TestApplyRefusesDuplicateObjects(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: files}\ndata: {a: b}\n"
	manifest := dsYAML("one", "one:1") + "---\n" + cm + "---\n" + dsYAML("one", "one:2")
	_, err := tc.api.Apply(ctx, "dup.yaml", []byte(manifest), false)
	require.ErrorIs(t, err, api.ErrInvalid)
	msg := err.Error()
	assert.Contains(t, msg, "dup.yaml:17: metadata.name: daemonset/files/one is declared twice in one request, here and at dup.yaml:1")
	_, err = tc.api.GetDaemonSet(ctx, "files/one")
	require.ErrorIs(t, err, api.ErrNotFound, "nothing of a refused request is applied")
	_, err = tc.api.GetConfigMap(ctx, "files/one")
	require.ErrorIs(t, err, api.ErrNotFound)

	for _, kind := range []string{"ConfigMap", "Secret"} {
		obj := fmt.Sprintf("apiVersion: v1\nkind: %s\nmetadata: {name: c, namespace: files}\ndata: {a: YQ==}\n", kind)
		_, err := tc.api.Apply(ctx, "dup.yaml", []byte(obj+"---\n"+obj), false)
		require.ErrorContains(t, err, "dup.yaml:6: metadata.name: "+strings.ToLower(kind)+"/files/c is declared twice", kind)
	}

	other := strings.Replace(dsYAML("one", "one:2"), "namespace: files", "namespace: other", 1)
	_, err = tc.api.Apply(ctx, "ok.yaml", []byte(dsYAML("one", "one:1")+"---\n"+cm+"---\n"+other), false)
	require.NoError(t, err, "another namespace or kind is another object")
}

// bigEnvYAML is a daemonset whose one env value has size bytes.
func bigEnvYAML(name string, size int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: %s, namespace: files}
spec:
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      containers:
      - name: main
        image: main:1
        env:
        - {name: BIG, value: "%s"}
`, name, name, name, strings.Repeat("x", size))
}

// limitMessage is how a refusal names the broker's packet limit.
var limitMessage = fmt.Sprintf("that the broker can deliver (max packet size %d)", maxPacketSize)

// TestApplyRefusesUndeliverableRevision: a template whose revision message
// exceeds the broker's packet limit (a 300 KB env value) is refused at
// apply, naming the field and the limit, and nothing is stored.
func TestApplyRefusesUndeliverableRevision(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	_, err := tc.api.Apply(ctx, "big.yaml", []byte(bigEnvYAML("big", 300_000)), false)
	require.ErrorIs(t, err, api.ErrInvalid)
	assert.Contains(t, err.Error(), "big.yaml:1: spec.template: daemonset files/big")
	assert.Contains(t, err.Error(), limitMessage)
	_, err = tc.api.GetDaemonSet(ctx, "files/big")
	require.ErrorIs(t, err, api.ErrNotFound)
}

// TestManifestsDirRefusesUndeliverableRevision: the same refusal for a
// file of the manifests directory, which is reported invalid.
func TestManifestsDirRefusesUndeliverableRevision(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.yaml")
	writeFile(t, path, bigEnvYAML("big", 300_000))
	tc := startController(t, Config{ManifestsDir: dir})
	src := tc.expectSource(t, path, api.SourceInvalid)
	require.Len(t, src.Errors, 1)
	assert.Contains(t, src.Errors[0], "spec.template: daemonset files/big")
	assert.Contains(t, src.Errors[0], limitMessage)
	_, err := tc.api.GetDaemonSet(context.Background(), "files/big")
	require.ErrorIs(t, err, api.ErrNotFound)
}

// largestDeliverable is the largest env value size with which
// bigEnvYAML's daemonset still passes checkObjects.
func largestDeliverable(t *testing.T) int {
	t.Helper()
	fits := func(size int) bool {
		objs, _, err := schema.Decode("probe.yaml", []byte(bigEnvYAML("edge", size)))
		require.NoError(t, err)
		return checkObjects(objs, deliveryLimit) == nil
	}
	lo, hi := 0, deliveryLimit // fits(lo), !fits(hi)
	require.True(t, fits(lo))
	require.False(t, fits(hi))
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// TestRolloutRestartRefusesUndeliverableRevision: a restart whose
// annotation would push the revision past the packet limit is refused,
// naming the limit, and the daemonset keeps its revision.
func TestRolloutRestartRefusesUndeliverableRevision(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	tc.applyYAML(t, bigEnvYAML("edge", largestDeliverable(t)))
	before, err := tc.api.GetDaemonSet(ctx, "files/edge")
	require.NoError(t, err)

	_, err = tc.api.Rollout(ctx, "files/edge", api.RolloutRequest{Action: api.RolloutRestart})
	require.ErrorIs(t, err, api.ErrInvalid)
	assert.Contains(t, err.Error(), limitMessage)
	after, err := tc.api.GetDaemonSet(ctx, "files/edge")
	require.NoError(t, err)
	assert.Equal(t, before.CurrentHash, after.CurrentHash)
	assert.Equal(t, before.Generation, after.Generation)
}

// TestRolloutUndoRefusesUndeliverableRevision: an undo to a stored
// revision that no longer fits the packet limit (one stored under a larger
// limit) is refused, naming the limit, and changes nothing.
func TestRolloutUndoRefusesUndeliverableRevision(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	// Revision 1 was stored by a controller whose broker took larger
	// packets: put it in the store as that controller would have.
	objs, _, err := schema.Decode("old.yaml", []byte(bigEnvYAML("edge", 300_000)))
	require.NoError(t, err)
	tc.passMu.Lock()
	_, err = tc.applyObjectsLocked(objs, nil, applyRequest{})
	tc.passMu.Unlock()
	require.NoError(t, err)
	tc.applyYAML(t, bigEnvYAML("edge", 10))
	before, err := tc.api.GetDaemonSet(ctx, "files/edge")
	require.NoError(t, err)
	require.EqualValues(t, 2, before.CurrentRevision)

	_, err = tc.api.Rollout(ctx, "files/edge", api.RolloutRequest{Action: api.RolloutUndo, ToRevision: 1})
	require.ErrorIs(t, err, api.ErrInvalid)
	assert.Contains(t, err.Error(), limitMessage)
	after, err := tc.api.GetDaemonSet(ctx, "files/edge")
	require.NoError(t, err)
	assert.Equal(t, before.CurrentHash, after.CurrentHash)
}

// TestObjectErrorNamesObjectAndPlace: a write that fails inside an apply
// is reported with the object and where it was declared; a refusal the
// API answers as such is passed on as it is.
func TestObjectErrorNamesObjectAndPlace(t *testing.T) {
	objs, _, err := schema.Decode("a.yaml", []byte(dsYAML("one", "one:1")+"---\n"+
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: files}\ndata: {a: YQ==}\n"))
	require.NoError(t, err)
	failed := errors.New("write failed")
	assert.EqualError(t, objectError(objs[0], failed), "daemonset/files/one (a.yaml:1): write failed")
	assert.EqualError(t, objectError(objs[1], failed), "secret/files/s (a.yaml:12): write failed")
	refused := fmt.Errorf("%w: immutable", api.ErrInvalid)
	assert.Equal(t, refused, objectError(objs[0], refused))
}
