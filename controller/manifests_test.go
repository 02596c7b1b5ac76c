package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// dsYAML is a daemonset manifest in namespace files.
func dsYAML(name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: %s, namespace: files}
spec:
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      containers:
      - {name: main, image: "%s"}
`, name, name, name, image)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// expectImage waits until daemonset key exists with image.
func (tc *testController) expectImage(t *testing.T, key, image string) api.DaemonSet {
	t.Helper()
	var ds api.DaemonSet
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		var err error
		if ds, err = tc.api.GetDaemonSet(context.Background(), key); err != nil {
			return err
		}
		if got := ds.Manifest.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("daemonset %s has image %s, want %s", key, got, image)
		}
		return nil
	})
	return ds
}

// expectSource waits until the source at path has status.
func (tc *testController) expectSource(t *testing.T, path, status string) api.Source {
	t.Helper()
	var found api.Source
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		srcs, err := tc.api.Sources(context.Background())
		if err != nil {
			return err
		}
		i := slices.IndexFunc(srcs, func(s api.Source) bool { return s.Path == path })
		if i < 0 {
			return fmt.Errorf("no source %s in %+v", path, srcs)
		}
		if found = srcs[i]; found.Status != status {
			return fmt.Errorf("source %s is %s, want %s", path, found.Status, status)
		}
		return nil
	})
	return found
}

func (tc *testController) expectGone(t *testing.T, key string) {
	t.Helper()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, err := tc.api.GetDaemonSet(context.Background(), key); err == nil {
			return fmt.Errorf("daemonset %s still exists", key)
		}
		return nil
	})
}

func readyz(t *testing.T, tc *testController) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + tc.APIAddr().String() + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestManifestsDirApplies(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	writeFile(t, a, exporterYAML)
	tc := startController(t, Config{ManifestsDir: dir})

	ds := tc.expectImage(t, "monitoring/exporter", "registry.local/exporter:1.0")
	assert.Equal(t, "file:"+a, ds.Source)
	src := tc.expectSource(t, a, api.SourceApplied)
	assert.Equal(t, []string{"monitoring/exporter"}, src.DaemonSets)
	assert.NotNil(t, src.LastApplied)

	writeFile(t, a, strings.Replace(exporterYAML, "exporter:1.0", "exporter:2.0", 1))
	ds = tc.expectImage(t, "monitoring/exporter", "registry.local/exporter:2.0")
	assert.Equal(t, int64(2), ds.Generation, "the edit configured the daemonset")

	// A subdirectory created after the start is watched too: an invalid
	// file in it changes nothing while a valid one beside it applies.
	bad := filepath.Join(dir, "sub", "bad.yaml")
	writeFile(t, bad, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: broken, namespace: files}\nspec: {}\n")
	writeFile(t, filepath.Join(dir, "sub", "good.yaml"), dsYAML("good", "good:1"))
	tc.expectImage(t, "files/good", "good:1")
	src = tc.expectSource(t, bad, api.SourceInvalid)
	require.NotEmpty(t, src.Errors)
	assert.Contains(t, strings.Join(src.Errors, "\n"), "spec.template.spec.containers")
	_, err := tc.api.GetDaemonSet(context.Background(), "files/broken")
	require.ErrorIs(t, err, api.ErrNotFound)

	code, body := readyz(t, tc)
	assert.Equal(t, http.StatusOK, code, "an invalid file does not make the controller unready")
	assert.Contains(t, body, bad)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error { // the event sink writes after the apply
		evs := tc.eventsOn(t, "source/"+bad)
		if len(evs) == 0 || evs[len(evs)-1].Reason != "InvalidManifest" {
			return fmt.Errorf("want an InvalidManifest event last about %s, have %+v", bad, evs)
		}
		return nil
	})

	// Breaking a file that applied keeps what it applied.
	writeFile(t, a, strings.Replace(exporterYAML, "image: registry.local/exporter:1.0", "image: \"\"", 1))
	src = tc.expectSource(t, a, api.SourceInvalid)
	assert.Equal(t, []string{"monitoring/exporter"}, src.DaemonSets)
	tc.expectImage(t, "monitoring/exporter", "registry.local/exporter:2.0")

	// Without prune, a removed file's daemonsets stay.
	require.NoError(t, os.Remove(a))
	src = tc.expectSource(t, a, api.SourceRemoved)
	assert.Equal(t, []string{"monitoring/exporter"}, src.DaemonSets)
	tc.expectImage(t, "monitoring/exporter", "registry.local/exporter:2.0")
}

func TestManifestsDirPrunes(t *testing.T) {
	dir := t.TempDir()
	multi := filepath.Join(dir, "multi.yaml")
	single := filepath.Join(dir, "single.json")
	writeFile(t, multi, dsYAML("one", "one:1")+"---\n"+dsYAML("two", "two:1"))
	writeFile(t, single, `{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "three", "namespace": "files"},
"spec": {"selector": {"matchLabels": {"app": "three"}}, "template": {"metadata": {"labels": {"app": "three"}},
"spec": {"containers": [{"name": "main", "image": "three:1"}]}}}}`)
	tc := startController(t, Config{ManifestsDir: dir, Prune: true})
	tc.expectImage(t, "files/one", "one:1")
	tc.expectImage(t, "files/two", "two:1")
	tc.expectImage(t, "files/three", "three:1")
	tc.applyYAML(t, dsYAML("by-hand", "hand:1"))

	// A daemonset removed from its file is pruned; the rest stays.
	writeFile(t, multi, dsYAML("one", "one:1"))
	tc.expectGone(t, "files/two")
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		// The source's view is updated after the prune is visible.
		if src := tc.expectSource(t, multi, api.SourceApplied); !slices.Equal(src.DaemonSets, []string{"files/one"}) {
			return fmt.Errorf("source %s manages %v, want files/one", multi, src.DaemonSets)
		}
		return nil
	})

	// A removed file's daemonsets are pruned.
	require.NoError(t, os.Remove(single))
	tc.expectGone(t, "files/three")
	tc.expectSource(t, single, api.SourceRemoved)

	// Removed while the controller was down: pruned at the next start.
	tc.stop()
	require.NoError(t, os.Remove(multi))
	tc2 := startController(t, Config{DataDir: tc.cfg.DataDir, ManifestsDir: dir, Prune: true})
	tc2.expectGone(t, "files/one")
	tc2.expectSource(t, multi, api.SourceRemoved)

	ds := tc2.expectImage(t, "files/by-hand", "hand:1")
	assert.Empty(t, ds.Source, "a hand apply is never pruned by the watcher")
}

func TestFileSources(t *testing.T) {
	rec := func(name, source string, deleted bool) store.DaemonSetRecord {
		r := store.DaemonSetRecord{Source: source}
		r.DaemonSet.Metadata.Namespace, r.DaemonSet.Metadata.Name = "ns", name
		if deleted {
			now := time.Now()
			r.DeletedAt = &now
		}
		return r
	}
	got := fileSources([]store.DaemonSetRecord{
		rec("b", "file:x.yaml", false), rec("a", "file:x.yaml", false), rec("c", "file:y.yaml", false),
		rec("d", "cli:/tmp/x.yaml", false), rec("e", "", false), rec("f", "file:x.yaml", true),
	})
	assert.Equal(t, map[string][]string{"x.yaml": {"ns/a", "ns/b"}, "y.yaml": {"ns/c"}}, got)
}

// TestManifestsFileOwnsConfigObjects: ConfigMaps and Secrets applied from a
// file belong to it like its daemonsets: listed on the source and pruned
// with it.
func TestManifestsFileOwnsConfigObjects(t *testing.T) {
	// No watcher: the test drives pruning and removeSource itself.
	path := filepath.Join(t.TempDir(), "agent.yaml")
	tc := startController(t, Config{Prune: true})
	_, err := tc.applyObjects([]schema.Object{
		configMapObj("edge", "agent-config", map[string]string{"k": "v"}),
		secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false),
		configMapObj("edge", "left-out", nil),
	}, nil, applyRequest{source: fileSourcePrefix + path})
	require.NoError(t, err)
	assert.Equal(t, ownedObjects{"configmap/edge/agent-config", "configmap/edge/left-out", "daemonset/edge/agent", "secret/edge/api-key"},
		tc.ownedBy(path))

	tc.passMu.Lock()
	_, err = tc.applyLocked(nil, nil, applyRequest{source: fileSourcePrefix + path, prune: tc.pruneList(path, map[string]bool{
		"configmap/edge/agent-config": true, "daemonset/edge/agent": true, "secret/edge/api-key": true}, nil)})
	tc.passMu.Unlock()
	require.NoError(t, err)
	left := tc.ownedBy(path)
	assert.Equal(t, ownedObjects{"configmap/edge/agent-config", "daemonset/edge/agent", "secret/edge/api-key"}, left)
	assert.Equal(t, api.Source{Path: path, DaemonSets: []string{"edge/agent"}, ConfigMaps: []string{"edge/agent-config"},
		Secrets: []string{"edge/api-key"}}, left.view(api.Source{Path: path}))
	_, err = tc.api.GetConfigMap(context.Background(), "edge/left-out")
	assert.ErrorIs(t, err, api.ErrNotFound, "an object that left its file is pruned")

	// The file is gone: everything it applied is pruned.
	tc.removeSource(context.Background(), path, nil)
	assert.Empty(t, tc.ownedBy(path))
	secrets, err := tc.api.ListSecrets(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, secrets)
}

// TestManifestsDirConfigObjects runs the watcher over a file holding a
// ConfigMap, a Secret and a daemonset.
func TestManifestsDirConfigObjects(t *testing.T) {
	if _, _, err := schema.Decode("probe.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); err != nil {
		t.Skip("schema.Decode does not decode ConfigMaps yet (the schema part of issue 12)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	writeFile(t, path, `apiVersion: v1
kind: ConfigMap
metadata: {name: agent-config, namespace: files}
data: {agent.yaml: "level: info"}
---
apiVersion: v1
kind: Secret
metadata: {name: api-key, namespace: files}
stringData: {token: `+secretValue+`}
---
`+dsYAML("one", "one:1"))
	tc := startController(t, Config{ManifestsDir: dir, Prune: true})
	tc.expectImage(t, "files/one", "one:1")
	src := tc.expectSource(t, path, api.SourceApplied)
	assert.Equal(t, []string{"files/agent-config"}, src.ConfigMaps)
	assert.Equal(t, []string{"files/api-key"}, src.Secrets)
	s, err := tc.api.GetSecret(context.Background(), "files/api-key", true)
	require.NoError(t, err)
	assert.Equal(t, secretValue, string(s.Data["token"]), "stringData is merged into data")

	require.NoError(t, os.Remove(path))
	tc.expectGone(t, "files/one")
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		cms, err := tc.api.ListConfigMaps(context.Background())
		if err != nil || len(cms) > 0 {
			return fmt.Errorf("configmaps %v after the file went (err %v)", cms, err)
		}
		return nil
	})
}

// eventsOn returns the stored events about object.
func (tc *testController) eventsOn(t *testing.T, object string) []api.Event {
	t.Helper()
	evs, err := tc.api.Events(context.Background(), api.EventFilter{Object: object})
	require.NoError(t, err)
	return evs
}

// TestManifestsDirSameObjectInTwoFiles: a daemonset declared in two files
// of the manifests directory used to take the spec of the file applied
// last, with no warning. Now both files are invalid, each naming the
// other (on the source, in an event, on /readyz), and neither changes the
// live object until one of them no longer declares it: the directory's
// content, not the order the controller saw it in, decides.
func TestManifestsDirSameObjectInTwoFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, dsYAML("shared", "shared:1")+"---\n"+dsYAML("only-a", "a:1"))
	tc := startController(t, Config{ManifestsDir: dir, Prune: true})
	tc.expectImage(t, "files/shared", "shared:1")
	tc.expectSource(t, a, api.SourceApplied)

	writeFile(t, b, dsYAML("only-b", "b:1")+"---\n"+dsYAML("shared", "shared:2"))
	srcB := tc.expectSource(t, b, api.SourceInvalid)
	srcA := tc.expectSource(t, a, api.SourceInvalid)
	assert.Equal(t, []string{b + ":12: metadata.name: daemonset/files/shared is declared twice, here and at " + a +
		":1; declare each object once (neither copy is applied until then)"}, srcB.Errors)
	assert.Equal(t, []string{a + ":1: metadata.name: daemonset/files/shared is declared twice, here and at " + b +
		":12; declare each object once (neither copy is applied until then)"}, srcA.Errors)
	assert.Equal(t, []string{"files/only-a", "files/shared"}, srcA.DaemonSets, "a keeps what it applied")
	for _, path := range []string{a, b} {
		// Events are stored behind the source's status: wait for them.
		checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
			evs := tc.eventsOn(t, sourceObject(path))
			if len(evs) == 0 {
				return fmt.Errorf("%s: no event yet", path)
			}
			last := evs[len(evs)-1]
			if last.Reason != "InvalidManifest" || !strings.Contains(last.Message, a) || !strings.Contains(last.Message, b) {
				return fmt.Errorf("%s: last event %s %q, want InvalidManifest naming both files", path, last.Reason, last.Message)
			}
			return nil
		})
	}
	code, body := readyz(t, tc)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "manifest file "+a+" is invalid")
	assert.Contains(t, body, "manifest file "+b+" is invalid")
	assert.Contains(t, body, "daemonset/files/shared is also declared in "+b)
	assert.Contains(t, body, "daemonset/files/shared is also declared in "+a)
	ds := tc.expectImage(t, "files/shared", "shared:1")
	assert.Equal(t, int64(1), ds.Generation, "neither copy applied")
	assert.Equal(t, "file:"+a, ds.Source)
	_, err := tc.api.GetDaemonSet(context.Background(), "files/only-b")
	require.ErrorIs(t, err, api.ErrNotFound, "nothing of an invalid file is applied")

	// Editing one of them while both declare it changes nothing either.
	occurrences := func(path string) int {
		n := 0
		for _, e := range tc.eventsOn(t, sourceObject(path)) {
			n += max(1, int(e.Count))
		}
		return n
	}
	before := occurrences(a)
	writeFile(t, a, dsYAML("shared", "shared:3")+"---\n"+dsYAML("only-a", "a:2"))
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if occurrences(a) == before {
			return fmt.Errorf("the edit of %s is not reported yet", a)
		}
		return nil
	})
	tc.expectSource(t, a, api.SourceInvalid)
	tc.expectImage(t, "files/shared", "shared:1")
	tc.expectImage(t, "files/only-a", "a:1")

	// Resolved by moving the object to b: a applies without it, b with it,
	// and the daemonset moves to b without being pruned and re-created.
	writeFile(t, a, dsYAML("only-a", "a:2"))
	tc.expectSource(t, a, api.SourceApplied)
	tc.expectSource(t, b, api.SourceApplied)
	ds = tc.expectImage(t, "files/shared", "shared:2")
	assert.Equal(t, "file:"+b, ds.Source)
	assert.Equal(t, int64(2), ds.Generation, "configured by b, not pruned by a and created anew")
	tc.expectImage(t, "files/only-a", "a:2")
	tc.expectImage(t, "files/only-b", "b:1")
	for _, e := range tc.eventsOn(t, sourceObject(a)) {
		assert.NotEqual(t, "Pruned", e.Reason, "a pruned %s", e.Message)
	}
	_, body = readyz(t, tc)
	assert.NotContains(t, body, "is invalid")
}

// TestManifestsDuplicatesSync drives syncManifests itself: an object in
// three files names the other two in each; a rescan of unchanged files
// reports nothing again; a file removed while another declares its object
// hands the object over, even with prune.
func TestManifestsDuplicatesSync(t *testing.T) {
	dir := t.TempDir()
	c := newIdleController(t, Config{ManifestsDir: dir, Prune: true})
	ctx := context.Background()
	a, b, d := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "d.yaml")
	writeFile(t, a, dsYAML("x", "x:a"))
	c.syncManifests(ctx)
	writeFile(t, b, dsYAML("x", "x:b"))
	writeFile(t, d, dsYAML("y", "y:1")+"---\n"+dsYAML("x", "x:d"))
	c.events.drain(nil)
	c.syncManifests(ctx)

	srcs := c.sources.list()
	require.Len(t, srcs, 3)
	for _, src := range srcs {
		assert.Equal(t, api.SourceInvalid, src.Status, src.Path)
	}
	assert.Equal(t, []string{d + ":12: metadata.name: daemonset/files/x is declared 3 times, here and at " + a + ":1, " + b +
		":1; declare each object once (neither copy is applied until then)"}, srcs[2].Errors)
	assert.Len(t, c.events.drain(nil), 3, "one InvalidManifest event per file")
	assert.Contains(t, c.sources.readyNotes()[0], "daemonset/files/x is also declared in "+b+", "+d)

	c.syncManifests(ctx)
	assert.Empty(t, c.events.drain(nil), "a rescan of the same files reports nothing again")
	rec, err := c.store.GetDaemonSet("files/x")
	require.NoError(t, err)
	assert.Equal(t, "x:a", rec.DaemonSet.Spec.Template.Spec.Containers[0].Image)
	_, err = c.store.GetDaemonSet("files/y")
	require.ErrorIs(t, err, store.ErrNotFound)

	// a, which applied x, goes; d still declares x with b: nothing moves.
	require.NoError(t, os.Remove(a))
	c.syncManifests(ctx)
	rec, err = c.store.GetDaemonSet("files/x")
	require.NoError(t, err, "not pruned: b and d declare it")
	assert.Equal(t, "file:"+a, rec.Source)
	assert.Equal(t, int64(1), rec.Generation)

	// b goes too: d alone declares x and takes it over.
	require.NoError(t, os.Remove(b))
	c.syncManifests(ctx)
	rec, err = c.store.GetDaemonSet("files/x")
	require.NoError(t, err)
	assert.Equal(t, "file:"+d, rec.Source)
	assert.Equal(t, "x:d", rec.DaemonSet.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int64(2), rec.Generation, "configured, not created anew")
	_, err = c.store.GetDaemonSet("files/y")
	require.NoError(t, err)
	assert.Empty(t, c.sources.readyNotes())
}

// TestManifestsObjectMovesBetweenFiles: with prune, moving a daemonset
// from one file to another in one change used to prune it with the file
// it left (read first) and create it anew from the other, restarting it
// on every device. It is handed over instead.
func TestManifestsObjectMovesBetweenFiles(t *testing.T) {
	dir := t.TempDir()
	c := newIdleController(t, Config{ManifestsDir: dir, Prune: true})
	ctx := context.Background()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, dsYAML("moving", "moving:1")+"---\n"+dsYAML("stays", "stays:1"))
	c.syncManifests(ctx)
	before, err := c.store.GetDaemonSet("files/moving")
	require.NoError(t, err)

	writeFile(t, a, dsYAML("stays", "stays:1"))
	writeFile(t, b, dsYAML("moving", "moving:1"))
	c.events.drain(nil)
	c.syncManifests(ctx)
	after, err := c.store.GetDaemonSet("files/moving")
	require.NoError(t, err)
	assert.Equal(t, "file:"+b, after.Source)
	assert.True(t, after.CreatedAt.Equal(before.CreatedAt), "the daemonset is the same, not created anew")
	for _, e := range c.events.drain(nil) {
		assert.NotEqual(t, "Pruned", e.Reason, "%s: %s", e.Object, e.Message)
	}
}
