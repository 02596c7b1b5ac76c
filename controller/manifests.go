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
// Config.Prune; otherwise it is kept and logged. An object declared in two
// files makes both invalid, each naming the other, until only one declares
// it; an object that moved to another file is handed over, never pruned
// (see syncManifests). An object applied through
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
	mu       sync.Mutex // guards files and declared
	files    map[string]*sourceState
	declared map[string]declaredObjects // by path: what its content declares
}

// sourceState is one file's view and the content it was last acted on.
type sourceState struct {
	view api.Source
	// hash is the content last applied or found invalid; zero makes the
	// next sync apply the file again.
	hash [sha256.Size]byte
	// duplicates names each object the file declares that another file
	// declares too ("daemonset/ns/name is also declared in PATH"): while
	// there are any, the file is invalid and nothing of it is applied.
	duplicates []string
}

// declaredObjects is what one content of a file declares, remembered so
// that a rescan decodes only the files that changed.
type declaredObjects struct {
	sum [sha256.Size]byte
	// objects are the file's objects, each once, in file order; nil if
	// the file does not decode.
	objects []declaration
}

// declaration is one object a file declares and where.
type declaration struct {
	name string // objectName: "daemonset/ns/name"
	at   schema.Source
}

// manifestFile is one file of the manifests directory as a sync read it.
type manifestFile struct {
	path     string
	data     []byte
	sum      [sha256.Size]byte
	declared []declaration
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
//
// An object (same kind, namespace and name) declared in two files is a
// conflict only an operator can resolve: both files are invalid, each
// naming the other, and neither changes the live object (nor anything
// else) until one of them no longer declares it. The directory's content
// alone decides; which file the controller read first does not. Once
// resolved, the files are applied again, and an object that moved from
// one file to the other is handed over, not pruned and created anew.
func (c *Controller) syncManifests(ctx context.Context) {
	paths, err := schema.ManifestFiles(c.cfg.ManifestsDir)
	if err != nil {
		c.log.Error("read manifests directory; nothing changed", "dir", c.cfg.ManifestsDir, "err", err)
		return
	}
	present := make(map[string]bool, len(paths))
	var files []manifestFile
	for _, path := range paths {
		if ctx.Err() != nil {
			return
		}
		present[path] = true // a transient read error is not a removal
		data, err := os.ReadFile(path)
		if err != nil {
			c.log.Warn("read manifest file; retried on the next change", "source", path, "err", err)
			continue
		}
		sum := sha256.Sum256(data)
		files = append(files, manifestFile{path: path, data: data, sum: sum, declared: c.sources.declarations(path, data, sum)})
	}
	dups, claimed := duplicateDeclarations(files)
	for _, f := range files {
		if ctx.Err() != nil {
			return
		}
		c.syncFile(ctx, f, dups[f.path], claimed)
	}
	c.removeMissing(ctx, present, claimed)
}

// syncFile acts on one file: reports its duplicates (a new content, or
// other duplicates than last time), or applies it if its content changed
// or it had duplicates before. claimed names every object some file
// declares, which no file prunes.
func (c *Controller) syncFile(ctx context.Context, f manifestFile, dups []duplicate, claimed map[string]bool) {
	unchanged, hadDups := c.sources.unchanged(f.path, f.sum)
	switch {
	case len(dups) > 0:
		var verr schema.ValidationError
		notes := make([]string, len(dups))
		for i, d := range dups {
			verr.Errors, notes[i] = append(verr.Errors, d.problem), d.note
		}
		if unchanged && slices.Equal(notes, hadDups) {
			return
		}
		c.reportInvalid(f.path, &verr, f.sum)
		c.sources.setDuplicates(f.path, notes)
	case unchanged && len(hadDups) == 0:
	default:
		c.applySource(ctx, f.path, f.data, f.sum, claimed)
	}
}

// declarations returns what path's content (data, of hash sum) declares,
// decoding it only if that content is not the one remembered.
func (t *sourceTable) declarations(path string, data []byte, sum [sha256.Size]byte) []declaration {
	t.mu.Lock()
	d, ok := t.declared[path]
	t.mu.Unlock()
	if ok && d.sum == sum {
		return d.objects
	}
	d = declaredObjects{sum: sum}
	if objs, _, err := schema.Decode(path, data); err == nil {
		seen := map[string]bool{}
		for _, obj := range objs {
			if name, ok := objectID(obj); ok && !seen[name] {
				seen[name] = true
				d.objects = append(d.objects, declaration{name: name, at: obj.Source})
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.declared == nil {
		t.declared = make(map[string]declaredObjects)
	}
	t.declared[path] = d
	return d.objects
}

// forgetDeclared drops what is remembered of a removed file's content.
func (t *sourceTable) forgetDeclared(path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.declared, path)
}

// duplicate is one object a file declares that other files declare too.
type duplicate struct {
	problem schema.FieldError // where in the file, naming the other places
	note    string            // "daemonset/ns/name is also declared in PATH"
}

// duplicateDeclarations finds the objects declared in more than one of
// files: per file, one duplicate per such object. claimed names every
// object any of files declares.
func duplicateDeclarations(files []manifestFile) (dups map[string][]duplicate, claimed map[string]bool) {
	where := map[string][]schema.Source{}
	var order []string
	for _, f := range files {
		for _, d := range f.declared {
			if len(where[d.name]) == 0 {
				order = append(order, d.name)
			}
			where[d.name] = append(where[d.name], d.at)
		}
	}
	dups = map[string][]duplicate{}
	claimed = make(map[string]bool, len(where))
	for _, name := range order {
		claimed[name] = true
		if places := where[name]; len(places) > 1 {
			for i, here := range places {
				dups[here.File] = append(dups[here.File], duplicateAt(name, here, slices.Delete(slices.Clone(places), i, i+1)))
			}
		}
	}
	return dups, claimed
}

// duplicateAt is object name, declared here, declared at others too.
func duplicateAt(name string, here schema.Source, others []schema.Source) duplicate {
	places, files := make([]string, len(others)), make([]string, len(others))
	for i, o := range others {
		places[i], files[i] = sourcePlace(o), o.File
	}
	times := "twice"
	if len(others) > 1 {
		times = fmt.Sprintf("%d times", len(others)+1)
	}
	return duplicate{
		problem: schema.FieldError{File: here.File, Line: here.Line, Field: "metadata.name",
			Message: fmt.Sprintf("%s is declared %s, here and at %s; declare each object once (neither copy is applied until then)",
				name, times, strings.Join(places, ", "))},
		note: name + " is also declared in " + strings.Join(files, ", "),
	}
}

// unchanged reports whether path's content is what was last acted on, and
// the duplicates it was last found invalid for.
func (t *sourceTable) unchanged(path string, sum [sha256.Size]byte) (same bool, duplicates []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.files[path]
	if !ok {
		return false, nil
	}
	return st.view.Status != api.SourceRemoved && st.hash == sum, st.duplicates
}

// setDuplicates records the duplicates path was found invalid for.
func (t *sourceTable) setDuplicates(path string, duplicates []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.files[path]; ok {
		st.duplicates = duplicates
	}
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
//
// An object the file no longer declares but another file does (claimed)
// is not pruned: that file takes it over.
func (c *Controller) applySource(ctx context.Context, path string, data []byte, sum [sha256.Size]byte, claimed map[string]bool) {
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
	out, err := c.applyLocked(objs, warnings, applyRequest{source: fileSourcePrefix + path, prune: c.pruneList(path, keep, claimed)})
	c.passMu.Unlock()
	if err != nil {
		c.reportInvalid(path, err, sum)
		return
	}
	now := c.now()
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
func (c *Controller) removeMissing(ctx context.Context, present, claimed map[string]bool) {
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
		c.sources.forgetDeclared(path)
		c.removeSource(ctx, path, claimed)
	}
}

// removeSource deals with one removed file: its daemonsets are pruned with
// Config.Prune, else kept; those another file declares (claimed) are left
// to it. It logs once, when the file goes.
func (c *Controller) removeSource(ctx context.Context, path string, claimed map[string]bool) {
	first := c.sources.status(path) != api.SourceRemoved
	if prune := c.pruneList(path, nil, claimed); len(prune) > 0 {
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
			why := "prune is off"
			if c.cfg.Prune {
				why = "another file declares it"
			}
			msg += "; kept " + strings.Join(owned, ", ") + " (" + why + ")"
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
// keep is not nil (a changed file; removeSource logs a removed one). An
// object another file declares (claimed) is never in the list: it moved.
func (c *Controller) pruneList(path string, keep, claimed map[string]bool) []string {
	var prune []string
	for _, obj := range c.ownedBy(path) {
		switch {
		case keep[obj], claimed[obj]:
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
	for _, r := range c.state.configMapList() {
		if path, ok := strings.CutPrefix(r.Source, fileSourcePrefix); ok {
			out[path] = append(out[path], configMapObject+r.Object.Key())
		}
	}
	for _, r := range c.state.secretList() {
		if path, ok := strings.CutPrefix(r.Source, fileSourcePrefix); ok {
			out[path] = append(out[path], secretObject+r.Object.Key())
		}
	}

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
// ready (see the top of this file), and the objects it shares with other
// files.
func (c *Controller) ReadyNotes(ctx context.Context) []string {
	return c.sources.readyNotes()
}

func (t *sourceTable) readyNotes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var notes []string
	for _, path := range slices.Sorted(maps.Keys(t.files)) {
		st := t.files[path]
		if st.view.Status != api.SourceInvalid {
			continue
		}
		var dups string
		if len(st.duplicates) > 0 {
			dups = ": " + strings.Join(st.duplicates, "; ")
		}
		notes = append(notes, fmt.Sprintf("warning: manifest file %s is invalid, nothing of it applied%s (%d problem(s); see edgesetctl get sources)",
			path, dups, len(st.view.Errors)))
	}
	return notes
}

var _ api.ReadyNoter = (*Controller)(nil)
