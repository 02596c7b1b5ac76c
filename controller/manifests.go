package controller

// The manifests directory (Config.ManifestsDir) makes deployments config-file
// driven. Every *.yaml, *.yml and *.json file below it, recursively, is one
// source, applied on its own at start and whenever it changes:
//
//	fsnotify event ──300 ms debounce──┐
//	60 s rescan ──────────────────────┼─> syncManifests: read every file,
//	start ────────────────────────────┘   apply the changed ones, handle the
//	                                      removed ones
//
// An object (DaemonSet, ConfigMap, Secret) applied from a file records
// Source "file:PATH"; that is how a file's objects are found again after a
// restart. A file's objects are applied in one transaction. An invalid file
// changes nothing (an event on "source/PATH", a log line with every problem,
// a note on /readyz) while the files around it still apply. An object that
// left its file, or whose file was removed, is deleted only with
// Config.Prune; otherwise it is kept and logged. An object applied through
// the API by anyone else records another Source and is never pruned here;
// the file takes it back the next time the file changes or the controller
// starts (a rescan re-applies only files whose content changed, so a hand
// change is not fought every minute).
//
// /readyz stays 200 with an invalid file: the controller serves, applies the
// valid files and keeps the invalid file's last good daemonsets, so taking
// it out of service (or having it restarted) would only make things worse.
// The body lists each invalid file after "ok".

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// Timing of the manifests directory watcher.
const (
	manifestsDebounce = 300 * time.Millisecond
	manifestsRescan   = 60 * time.Second
)

// fileSourcePrefix starts the Source of a daemonset applied from a file of
// the manifests directory.
const fileSourcePrefix = "file:"

// sourceTable is what the watcher knows of each file; the zero value is
// ready to use.
type sourceTable struct {
	mu    sync.Mutex // guards files
	files map[string]*sourceState
}

// sourceState is one file's view and the content it was last acted on.
type sourceState struct {
	view api.Source
	// hash is the content last applied or found invalid; zero makes the
	// next sync apply the file again.
	hash [sha256.Size]byte
}

// watchManifests is the Run part of the manifests directory: it applies
// every file at start, then on every change and every rescan, until ctx
// ends.
func (c *Controller) watchManifests(ctx context.Context) error {
	dir := c.cfg.ManifestsDir
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch manifests directory %s (manifests-dir): %w", dir, err)
	}
	defer w.Close()
	if err := addWatches(w, dir); err != nil {
		return fmt.Errorf("watch manifests directory %s (manifests-dir): %w", dir, err)
	}
	c.syncManifests(ctx)
	debounce := time.NewTimer(manifestsDebounce)
	debounce.Stop()
	defer debounce.Stop()
	rescan := time.NewTicker(manifestsRescan)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					c.addWatchesLogged(w, ev.Name)
				}
			}
			debounce.Reset(manifestsDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			c.log.Warn("watch manifests directory; rescanning", "dir", dir, "err", err)
			debounce.Reset(manifestsDebounce)
		case <-debounce.C:
			c.syncManifests(ctx)
		case <-rescan.C:
			c.addWatchesLogged(w, dir)
			c.syncManifests(ctx)
		}
	}
}

// addWatches watches root and every directory below it, or the directory
// of root when it is a file. Watching a directory twice is harmless.
func addWatches(w *fsnotify.Watcher, root string) error {
	info, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return w.Add(filepath.Dir(root))
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if err := w.Add(p); err != nil {
			return fmt.Errorf("watch %s: %w", p, err)
		}
		return nil
	})
}

func (c *Controller) addWatchesLogged(w *fsnotify.Watcher, root string) {
	if err := addWatches(w, root); err != nil {
		c.log.Warn("watch manifests directory", "dir", root, "err", err)
	}
}

// syncManifests applies every file whose content changed since it was last
// acted on, then deals with the files that are gone. A directory that
// cannot be read changes nothing.
func (c *Controller) syncManifests(ctx context.Context) {
	files, err := schema.ManifestFiles(c.cfg.ManifestsDir)
	if err != nil {
		c.log.Error("read manifests directory; nothing changed", "dir", c.cfg.ManifestsDir, "err", err)
		return
	}
	present := make(map[string]bool, len(files))
	for _, path := range files {
		if ctx.Err() != nil {
			return
		}
		data, err := os.ReadFile(path)
		if err != nil {
			c.log.Warn("read manifest file; retried on the next change", "source", path, "err", err)
			present[path] = true // a transient error is not a removal
			continue
		}
		present[path] = true
		sum := sha256.Sum256(data)
		if c.sources.unchanged(path, sum) {
			continue
		}
		c.applySource(ctx, path, data, sum)
	}
	c.removeMissing(ctx, present)
}

// unchanged reports whether path's content is what was last acted on.
func (t *sourceTable) unchanged(path string, sum [sha256.Size]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.files[path]
	return ok && st.view.Status != api.SourceRemoved && st.hash == sum
}

// set records path's state.
func (t *sourceTable) set(path string, st sourceState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files == nil {
		t.files = make(map[string]*sourceState)
	}
	t.files[path] = &st
}

// status returns path's status, empty when unknown.
func (t *sourceTable) status(path string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.files[path]; ok {
		return st.view.Status
	}
	return ""
}

// lastApplied is when path was last applied successfully, nil if never.
func (t *sourceTable) lastApplied(path string) *time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.files[path]; ok {
		return st.view.LastApplied
	}
	return nil
}

// list returns every source, sorted by path.
func (t *sourceTable) list() []api.Source {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]api.Source, 0, len(t.files))
	for _, st := range t.files {
		v := st.view
		v.DaemonSets = slices.Clone(v.DaemonSets)
		v.ConfigMaps, v.Secrets = slices.Clone(v.ConfigMaps), slices.Clone(v.Secrets)
		v.Errors = slices.Clone(v.Errors)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b api.Source) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// applySource applies one file on its own, together with the pruning of
// the objects it no longer declares (Config.Prune), in one store
// transaction. An invalid file is reported and changes nothing, and so
// does a file whose write fails.
func (c *Controller) applySource(ctx context.Context, path string, data []byte, sum [sha256.Size]byte) {
	objs, warnings, err := schema.Decode(path, data)
	if err == nil {
		err = checkObjects(objs, deliveryLimit)
	}
	if err != nil {
		c.reportInvalid(path, err, sum)
		return
	}
	keep := make(map[string]bool, len(objs))
	for _, obj := range objs {
		name, _ := objectID(obj)
		keep[name] = true
	}
	c.passMu.Lock()
	out, err := c.applyLocked(objs, warnings, applyRequest{source: fileSourcePrefix + path, prune: c.pruneList(path, keep)})
	c.passMu.Unlock()
	if err != nil {
		c.reportInvalid(path, err, sum)
		return
	}
	now := time.Now()
	var changes []string
	for _, r := range out.results {
		if r.Action != api.ActionUnchanged {
			changes = append(changes, fmt.Sprintf("%s %s", objectName(r.Kind, r.Key), r.Action))
		}
	}
	if len(changes) > 0 {
		c.log.Info("applied manifest file", "source", path, "changes", strings.Join(changes, ", "))
		c.events.add(sourceObject(path), schema.EventNormal, "Applied", strings.Join(changes, ", "))
	}
	c.reportPruned(path, out.pruned)
	c.sources.set(path, sourceState{hash: sum, view: c.ownedBy(path).view(api.Source{
		Path: path, Status: api.SourceApplied, LastApplied: &now,
	})})
}

// reportInvalid records that path could not be applied, with every
// problem. Only a validation problem is remembered by content: any other
// error (the store failed) is retried on the next sync.
func (c *Controller) reportInvalid(path string, err error, sum [sha256.Size]byte) {
	problems := problemLines(err)
	var verr *schema.ValidationError
	if !errors.As(err, &verr) {
		sum = [sha256.Size]byte{}
	}
	c.log.Warn("invalid manifest file; nothing of it applied", "source", path, "problems", strings.Join(problems, "; "))
	c.events.add(sourceObject(path), schema.EventWarning, "InvalidManifest",
		fmt.Sprintf("nothing applied, %d problem(s): %s", len(problems), strings.Join(problems, "; ")))
	owned, lastApplied := c.ownedBy(path), c.sources.lastApplied(path)
	c.sources.set(path, sourceState{hash: sum, view: owned.view(api.Source{
		Path: path, Status: api.SourceInvalid, LastApplied: lastApplied, Errors: problems,
	})})
}

// problemLines lists every problem of an apply error, one per line.
func problemLines(err error) []string {
	var verr *schema.ValidationError
	if errors.As(err, &verr) && len(verr.Errors) > 0 {
		out := make([]string, len(verr.Errors))
		for i, fe := range verr.Errors {
			out[i] = fe.Error()
		}
		return out
	}
	return []string{err.Error()}
}

// removeMissing handles the files that are gone: every file the table
// knows and every file a stored daemonset names (a file removed while the
// controller was down).
func (c *Controller) removeMissing(ctx context.Context, present map[string]bool) {
	gone := map[string]bool{}
	for _, s := range c.sources.list() {
		if !present[s.Path] {
			gone[s.Path] = true
		}
	}
	sources, err := c.fileSources()
	if err != nil {
		c.log.Error("list objects for removed manifest files", "err", err)
		return
	}
	for path := range sources {
		if !present[path] {
			gone[path] = true
		}
	}
	for _, path := range slices.Sorted(maps.Keys(gone)) {
		c.removeSource(ctx, path)
	}
}

// removeSource deals with one removed file: its daemonsets are pruned with
// Config.Prune, else kept. It logs once, when the file goes.
func (c *Controller) removeSource(ctx context.Context, path string) {
	first := c.sources.status(path) != api.SourceRemoved
	if prune := c.pruneList(path, nil); len(prune) > 0 {
		c.passMu.Lock()
		out, err := c.applyLocked(nil, nil, applyRequest{source: fileSourcePrefix + path, prune: prune})
		c.passMu.Unlock()
		if err != nil {
			c.log.Error("prune the objects of a removed manifest file; retried on the next sync", "source", path, "err", err)
		} else {
			c.reportPruned(path, out.pruned)
		}
	}
	owned := c.ownedBy(path)
	if first {
		msg := "file removed"
		if len(owned) > 0 {
			msg += "; kept " + strings.Join(owned, ", ") + " (prune is off)"
		}
		c.log.Info("manifest file removed", "source", path, "kept", owned, "prune", c.cfg.Prune)
		c.events.add(sourceObject(path), schema.EventNormal, "Removed", msg)
	}
	c.sources.set(path, sourceState{view: owned.view(api.Source{
		Path: path, Status: api.SourceRemoved, LastApplied: c.sources.lastApplied(path),
	})})
}

// pruneList names the objects path manages that keep (by objectName)
// does not name, to delete with the file's apply when Config.Prune is set.
// Without it the list is empty and each such object is kept, logged when
// keep is not nil (a changed file; removeSource logs a removed one).
func (c *Controller) pruneList(path string, keep map[string]bool) []string {
	var prune []string
	for _, obj := range c.ownedBy(path) {
		switch {
		case keep[obj]:
		case !c.cfg.Prune:
			if keep != nil {
				c.log.Info("object no longer in its manifest file; kept (prune is off)", "source", path, "object", obj)
			}
		default:
			prune = append(prune, obj)
		}
	}
	return prune
}

// reportPruned logs and records the objects a sync of path deleted.
func (c *Controller) reportPruned(path string, pruned []string) {
	for _, obj := range pruned {
		c.log.Info("pruned object no longer in its manifest file", "source", path, "object", obj)
		c.events.add(sourceObject(path), schema.EventNormal, "Pruned", obj+" pruned")
	}
}

// ownedObjects are objects by objectName, sorted.
type ownedObjects []string

// view fills in the source's DaemonSets, ConfigMaps and Secrets.
func (o ownedObjects) view(src api.Source) api.Source {
	for _, obj := range o {
		kind, key, _ := strings.Cut(obj, "/")
		switch kind + "/" {
		case configMapObject:
			src.ConfigMaps = append(src.ConfigMaps, key)
		case secretObject:
			src.Secrets = append(src.Secrets, key)
		default:
			src.DaemonSets = append(src.DaemonSets, key)
		}
	}
	return src
}

// objectName is "daemonset/ns/name", "configmap/ns/name" or
// "secret/ns/name" for an object of kind (an apply result's Kind).
func objectName(kind, key string) string {
	return strings.ToLower(cmp.Or(kind, schema.KindDaemonSet)) + "/" + key
}

// ownedBy lists, sorted, the live objects whose Source is the file path.
func (c *Controller) ownedBy(path string) ownedObjects {
	sources, err := c.fileSources()
	if err != nil {
		c.log.Error("list objects of a manifest file", "source", path, "err", err)
		return nil
	}
	return sources[path]
}

// fileSources groups the live objects applied from files by file path.
func (c *Controller) fileSources() (map[string]ownedObjects, error) {
	recs, err := c.store.ListDaemonSets()
	if err != nil {
		return nil, err
	}
	out := map[string]ownedObjects{}
	for path, keys := range fileSources(recs) {
		for _, k := range keys {
			out[path] = append(out[path], objectName(schema.KindDaemonSet, k))
		}
	}
	c.mu.Lock()
	for key, r := range c.state.configMaps {
		if path, ok := strings.CutPrefix(r.Source, fileSourcePrefix); ok {
			out[path] = append(out[path], configMapObject+key)
		}
	}
	for key, r := range c.state.secrets {
		if path, ok := strings.CutPrefix(r.Source, fileSourcePrefix); ok {
			out[path] = append(out[path], secretObject+key)
		}
	}
	c.mu.Unlock()
	for _, objs := range out {
		slices.Sort(objs)
	}
	return out, nil
}

// fileSources groups the live daemonsets applied from files by file path;
// each list is sorted.
func fileSources(recs []store.DaemonSetRecord) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		path, ok := strings.CutPrefix(r.Source, fileSourcePrefix)
		if !ok || r.DeletedAt != nil {
			continue
		}
		out[path] = append(out[path], r.Key())
	}
	for _, keys := range out {
		slices.Sort(keys)
	}
	return out
}

func sourceObject(path string) string { return "source/" + path }

// Sources lists the files of the manifests directory, sorted by path;
// empty when the controller watches none.
func (c *Controller) Sources(ctx context.Context) ([]api.Source, error) {
	return c.sources.list(), nil
}

// ReadyNotes names every invalid manifest file for /readyz, which stays
// ready (see the top of this file).
func (c *Controller) ReadyNotes(ctx context.Context) []string {
	var notes []string
	for _, s := range c.sources.list() {
		if s.Status == api.SourceInvalid {
			notes = append(notes, fmt.Sprintf("warning: manifest file %s is invalid, nothing of it applied (%d problem(s); see edgesetctl get sources)",
				s.Path, len(s.Errors)))
		}
	}
	return notes
}

var _ api.ReadyNoter = (*Controller)(nil)
