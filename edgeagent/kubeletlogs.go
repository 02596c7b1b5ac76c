package edgeagent

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Directories of the kubelet's log layout under KubeletLogs' root.
const (
	kubeletPodsDir       = "pods"
	kubeletContainersDir = "containers"
)

// KubeletLogs keeps the log layout the kubelet (with dockershim) kept under
// /var/log, so that log shippers configured for Kubernetes (fluent-bit,
// fluentd, vector, filebeat, promtail) find edgeset's container logs
// without a change:
//
//	pods/<namespace>_<podName>_<podUID>/<container>/<restartCount>.log
//	    -> the engine's log file (ContainerState.LogPath)
//	containers/<podName>_<namespace>_<container>-<containerID>.log
//	    -> the pods/ link above
//
// Docker's json-file driver writes the JSON lines dockershim produced,
// which the shippers read with their docker parser; the engine rotates the
// file by its own log-opts and the link follows the live file. The engine
// restarts a container in place, so its one log file holds every run: a
// container has one pods/ link, named by its current restart count, not
// one per run. Shippers must be able to read the link targets (Docker's
// /var/lib/docker/containers, which their upstream manifests mount).
//
// KubeletLogs owns every symlink under root's pods/ and containers/ and
// removes those it does not want; the directory must not be shared with a
// kubelet. It never removes anything but symlinks and empty directories.
// It is not safe for concurrent use; the agent calls it from its loop.
type KubeletLogs struct {
	root string
}

// NewKubeletLogs returns the layout rooted at root (made absolute, since
// the links' targets must be).
func NewKubeletLogs(root string) (*KubeletLogs, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("kubelet log dir %s: %w", root, err)
	}
	return &KubeletLogs{root: abs}, nil
}

// kubeletLink is one symlink of the layout: Path relative to the root,
// Target absolute.
type kubeletLink struct {
	Path, Target string
}

// Sync makes the layout hold exactly the links of containers: those with a
// LogPath and the labels LabelPodName, LabelPodUID, LabelDaemonSet and
// LabelContainer. restarts gives a container's restart count. Links of
// containers that are gone are removed with their emptied directories. It
// returns every failure joined, having done what it could.
func (k *KubeletLogs) Sync(containers []ContainerState, restarts func(ContainerState) int) error {
	want := kubeletLinks(k.root, containers, restarts)
	var errs []error
	for _, dir := range []string{kubeletPodsDir, kubeletContainersDir} {
		if err := os.MkdirAll(filepath.Join(k.root, dir), 0o755); err != nil {
			return fmt.Errorf("kubelet log layout: %w", err)
		}
	}
	have, err := k.links()
	if err != nil {
		errs = append(errs, err)
	}
	wanted := make(map[string]bool, len(want))
	for _, l := range want {
		wanted[l.Path] = true
		if have[l.Path] != l.Target {
			errs = append(errs, k.link(l))
		}
	}
	for p := range have {
		if !wanted[p] {
			errs = append(errs, k.unlink(p))
		}
	}
	errs = append(errs, k.removeEmptyDirs())
	return errors.Join(errs...)
}

// kubeletLinks decides the links for containers, pure. When two
// containers claim the same pods/ path (a leftover beside its successor),
// the running one wins, then the newest; the other gets no link.
func kubeletLinks(root string, containers []ContainerState, restarts func(ContainerState) int) []kubeletLink {
	sorted := slices.Clone(containers)
	slices.SortStableFunc(sorted, func(a, b ContainerState) int {
		if a.Running != b.Running {
			if a.Running {
				return -1
			}
			return 1
		}
		return cmp.Or(b.Created.Compare(a.Created), strings.Compare(a.ID, b.ID))
	})
	var out []kubeletLink
	claimed := map[string]bool{}
	for _, c := range sorted {
		podPath, ok := kubeletPodLog(c, restarts(c))
		if !ok || claimed[podPath] {
			continue
		}
		claimed[podPath] = true
		out = append(out,
			kubeletLink{Path: podPath, Target: c.LogPath},
			kubeletLink{Path: kubeletContainerLog(c), Target: filepath.Join(root, podPath)})
	}
	slices.SortFunc(out, func(a, b kubeletLink) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// kubeletPodLog is c's pods/ path, or false when c lacks a log file or one
// of the labels naming it.
func kubeletPodLog(c ContainerState, restarts int) (string, bool) {
	ns, _, _ := strings.Cut(c.Labels[LabelDaemonSet], "/")
	name, uid, ctr := c.Labels[LabelPodName], c.Labels[LabelPodUID], c.Labels[LabelContainer]
	if !filepath.IsAbs(c.LogPath) || slices.ContainsFunc([]string{ns, name, uid, ctr, c.ID}, badPathPart) {
		return "", false
	}
	return filepath.Join(kubeletPodsDir, ns+"_"+name+"_"+uid, ctr, strconv.Itoa(max(restarts, 0))+".log"), true
}

// badPathPart reports whether s cannot be one component of a link's path
// (labels are untrusted: a leftover container may carry anything).
func badPathPart(s string) bool {
	return s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00")
}

// kubeletContainerLog is c's containers/ path (c has the labels).
func kubeletContainerLog(c ContainerState) string {
	ns, _, _ := strings.Cut(c.Labels[LabelDaemonSet], "/")
	return filepath.Join(kubeletContainersDir, c.Labels[LabelPodName]+"_"+ns+"_"+c.Labels[LabelContainer]+"-"+c.ID+".log")
}

// links returns the symlinks under pods/ and containers/ with their
// targets, by path relative to the root.
func (k *KubeletLogs) links() (map[string]string, error) {
	have := map[string]string{}
	var errs []error
	for _, dir := range []string{kubeletPodsDir, kubeletContainersDir} {
		err := filepath.WalkDir(filepath.Join(k.root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			if d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			target, err := os.Readlink(p)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			rel, err := filepath.Rel(k.root, p)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			have[rel] = target
			return nil
		})
		errs = append(errs, err)
	}
	return have, errors.Join(errs...)
}

// link creates (or retargets) l atomically: a new link renamed over the
// old one, so a shipper never sees the path missing.
func (k *KubeletLogs) link(l kubeletLink) error {
	p := filepath.Join(k.root, l.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("kubelet log link %s: %w", p, err)
	}
	tmp := p + ".edgeset-new"
	_ = os.Remove(tmp)
	if err := os.Symlink(l.Target, tmp); err != nil {
		return fmt.Errorf("kubelet log link %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("kubelet log link %s: %w", p, err)
	}
	return nil
}

// unlink removes the symlink at rel; one already gone is not an error.
func (k *KubeletLogs) unlink(rel string) error {
	if err := os.Remove(filepath.Join(k.root, rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove kubelet log link: %w", err)
	}
	return nil
}

// removeEmptyDirs removes the pod and container directories under pods/
// that hold nothing any more, deepest first.
func (k *KubeletLogs) removeEmptyDirs() error {
	pods := filepath.Join(k.root, kubeletPodsDir)
	var dirs []string
	err := filepath.WalkDir(pods, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != pods {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, d := range dirs {
		entries, rerr := os.ReadDir(d)
		if rerr == nil && len(entries) == 0 {
			if rmErr := os.Remove(d); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				err = errors.Join(err, rmErr)
			}
		}
	}
	return err
}

// syncKubeletLogs brings the kubelet log layout, if enabled, to the
// containers a pass listed; a container created in the pass is linked in
// the next. Failures are logged: log links never hold up reconciling.
func (a *Agent) syncKubeletLogs(list []ContainerState) {
	if a.klogs == nil {
		return
	}
	if err := a.klogs.Sync(list, a.restartsOf); err != nil {
		a.log.Warn("kubelet log layout incomplete", "dir", a.cfg.KubeletLogDir, "err", err)
	}
}

// restartsOf is the restart count of the instance c belongs to (the agent
// counts restarts per instance).
func (a *Agent) restartsOf(c ContainerState) int {
	key, _, ok := containerIdentity(c)
	if !ok {
		return 0
	}
	if inst := a.instances[key]; inst != nil {
		return int(inst.restarts)
	}
	return 0
}
