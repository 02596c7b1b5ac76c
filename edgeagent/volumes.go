package edgeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Volume kinds: the directories under podDir/volumes, named as the
// kubelet names them under /var/lib/kubelet/pods/{uid}/volumes.
const (
	volumeKindConfigMap   = "kubernetes.io~configmap"
	volumeKindSecret      = "kubernetes.io~secret"
	volumeKindProjected   = "kubernetes.io~projected"
	volumeKindDownwardAPI = "kubernetes.io~downward-api"
	volumeKindEmptyDir    = "kubernetes.io~empty-dir"
)

// volumeDir is the host directory of one of an instance's volumes.
func volumeDir(dataDir, podUID, kind, name string) string {
	return filepath.Join(podDir(dataDir, podUID), "volumes", kind, name)
}

// volumeSetup is one volume as the agent prepares it on the host: root is
// what a mount without subPath binds. Exactly one of writer, emptyDir and
// hostPath describes it.
type volumeSetup struct {
	name     string
	root     string
	writer   bool // contents written by writeAtomic from payload; mounted read-only
	tmpfs    bool // a writer's directory is a tmpfs (SecretsInMemory and a Secret in it)
	payload  map[string]fileProjection
	emptyDir *schema.EmptyDirVolumeSource
	hostPath *schema.HostPathVolumeSource
	policy   LocalPolicy // of a hostPath: where it may resolve
}

// subPathSetup is a subPath to create (as a directory when missing) and to
// keep inside its volume. expr is the mount's subPathExpr when sub is its
// expansion, which may hold a secret: errors then name expr, never sub.
type subPathSetup struct {
	volume, root, sub string
	expr              string
}

// fail is err as a mountError naming the subPath. For a subPathExpr it
// names the expression and keeps only err's bare cause, since every path
// in err holds the expansion.
func (s subPathSetup) fail(err error) error {
	if s.expr == "" {
		return &mountError{volume: s.volume, err: fmt.Errorf("subPath %s: %w", s.sub, err)}
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return &mountError{volume: s.volume, err: fmt.Errorf("subPathExpr %q: %w", s.expr, err)}
}

// planVolumes computes every volume of the instance: payloads from the
// config objects and the downward API, host directories under the data
// dir. A missing non-optional ConfigMap, Secret or key is a *ConfigError.
func planVolumes(ic InstanceContext, f podFields, spec schema.PodSpec) (map[string]volumeSetup, error) {
	out := make(map[string]volumeSetup, len(spec.Volumes))
	var files, bytes int
	for i, v := range spec.Volumes {
		vs, err := planVolume(ic, f, spec, v)
		if err != nil {
			return nil, wrapField(fmt.Sprintf("spec.volumes[%d] (%s)", i, v.Name), err)
		}
		out[v.Name] = vs
		for _, p := range vs.payload {
			files, bytes = files+1, bytes+len(p.Data)
		}
	}
	if files > maxInstanceFiles || bytes > maxInstanceFileBytes {
		return nil, &ConfigError{Message: fmt.Sprintf("configMap, secret, downwardAPI and projected volumes would write %d files of %d bytes, more than the limit of %d files and %d bytes for one instance",
			files, bytes, maxInstanceFiles, maxInstanceFileBytes)}
	}
	return out, nil
}

// Bounds of what an instance's configMap, secret, downwardAPI and
// projected volumes write to the device (and compare on every pass).
// Items may name one key many times and volumes may project one object
// many times, so a small template could otherwise ask for gigabytes; the
// bounds leave room for dozens of full-size (1 MiB) objects, and for
// every key of a ConfigMap with 100,000 tiny ones, twice.
const (
	maxInstanceFiles     = 1 << 18
	maxInstanceFileBytes = 64 << 20
)

func planVolume(ic InstanceContext, f podFields, spec schema.PodSpec, v schema.Volume) (volumeSetup, error) {
	dir := func(kind string) string { return volumeDir(ic.DataDir, ic.PodUID(), kind, v.Name) }
	switch {
	case v.HostPath != nil:
		return volumeSetup{name: v.Name, root: v.HostPath.Path, hostPath: v.HostPath, policy: ic.Policy}, nil
	case v.ConfigMap != nil:
		p, err := configMapPayload(ic, v.ConfigMap.Name, v.ConfigMap.Items, modeOr(v.ConfigMap.DefaultMode), isTrue(v.ConfigMap.Optional))
		return volumeSetup{name: v.Name, root: dir(volumeKindConfigMap), writer: true, payload: p}, err
	case v.Secret != nil:
		p, err := secretPayload(ic, v.Secret.SecretName, v.Secret.Items, modeOr(v.Secret.DefaultMode), isTrue(v.Secret.Optional))
		return volumeSetup{name: v.Name, root: dir(volumeKindSecret), writer: true, payload: p, tmpfs: ic.SecretsInMemory}, err
	case v.DownwardAPI != nil:
		p := map[string]fileProjection{}
		err := downwardPayload(p, f, spec, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode), ic.Allocatable)
		return volumeSetup{name: v.Name, root: dir(volumeKindDownwardAPI), writer: true, payload: p}, err
	case v.Projected != nil:
		p, err := projectedPayload(ic, f, spec, *v.Projected)
		return volumeSetup{name: v.Name, root: dir(volumeKindProjected), writer: true, payload: p,
			tmpfs: ic.SecretsInMemory && projectsSecret(*v.Projected)}, err
	}
	ed := v.EmptyDir
	if ed == nil {
		ed = &schema.EmptyDirVolumeSource{}
	}
	return volumeSetup{name: v.Name, root: dir(volumeKindEmptyDir), emptyDir: ed}, nil
}

func modeOr(m *int32) int32 {
	if m != nil {
		return *m
	}
	return schema.DefaultVolumeMode
}

// configMapPayload is the kubelet's configmap MakePayload: every key of
// Data and BinaryData, or only items, each with its mode or defaultMode. An
// absent optional ConfigMap is an empty volume.
func configMapPayload(ic InstanceContext, name string, items []schema.KeyToPath, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	cm, ok := ic.ConfigMaps[name]
	if !ok {
		if optional {
			return map[string]fileProjection{}, nil
		}
		return nil, configMapNotFound(name)
	}
	lookup := func(k string) ([]byte, bool) {
		if s, ok := cm.Data[k]; ok {
			return []byte(s), true
		}
		b, ok := cm.BinaryData[k]
		return b, ok
	}
	keys := append(sortedKeys(cm.Data), sortedKeys(cm.BinaryData)...)
	return projectKeys(lookup, keys, items, defaultMode, optional, "configmap references non-existent config key: %s")
}

// secretPayload is the kubelet's secret MakePayload.
func secretPayload(ic InstanceContext, name string, items []schema.KeyToPath, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	s, ok := ic.Secrets[name]
	if !ok {
		if optional {
			return map[string]fileProjection{}, nil
		}
		return nil, secretNotFound(name)
	}
	lookup := func(k string) ([]byte, bool) { b, ok := s.Data[k]; return b, ok }
	return projectKeys(lookup, sortedKeys(s.Data), items, defaultMode, optional, "references non-existent secret key: %s")
}

func projectKeys(lookup func(string) ([]byte, bool), keys []string, items []schema.KeyToPath, defaultMode int32, optional bool, missing string) (map[string]fileProjection, error) {
	out := map[string]fileProjection{}
	if len(items) == 0 {
		for _, k := range keys {
			b, _ := lookup(k)
			out[k] = fileProjection{Data: b, Mode: defaultMode}
		}
		return out, nil
	}
	for _, it := range items {
		b, ok := lookup(it.Key)
		if !ok {
			if optional {
				continue
			}
			return nil, &ConfigError{Message: fmt.Sprintf(missing, it.Key)}
		}
		mode := defaultMode
		if it.Mode != nil {
			mode = *it.Mode
		}
		out[filepath.Clean(it.Path)] = fileProjection{Data: b, Mode: mode}
	}
	return out, nil
}

// downwardPayload adds one file per item: a field of the instance or a
// container's resource.
func downwardPayload(out map[string]fileProjection, f podFields, spec schema.PodSpec, items []schema.DownwardAPIVolumeFile, defaultMode int32, allocatable schema.ResourceList) error {
	for i, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = f.fieldValue(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = resourceValue(*it.ResourceFieldRef, schema.Container{}, spec, allocatable)
		}
		if err != nil {
			return fmt.Errorf("items[%d] (%s): %w", i, it.Path, err)
		}
		mode := defaultMode
		if it.Mode != nil {
			mode = *it.Mode
		}
		out[filepath.Clean(it.Path)] = fileProjection{Data: []byte(v), Mode: mode}
	}
	return nil
}

// projectsSecret reports whether a projected volume has a secret source.
func projectsSecret(p schema.ProjectedVolumeSource) bool {
	for _, src := range p.Sources {
		if src.Secret != nil {
			return true
		}
	}
	return false
}

// projectedPayload merges the sources in order, a later path replacing an
// earlier one.
func projectedPayload(ic InstanceContext, f podFields, spec schema.PodSpec, p schema.ProjectedVolumeSource) (map[string]fileProjection, error) {
	mode := modeOr(p.DefaultMode)
	out := map[string]fileProjection{}
	for i, src := range p.Sources {
		var part map[string]fileProjection
		var err error
		switch {
		case src.ConfigMap != nil:
			part, err = configMapPayload(ic, src.ConfigMap.Name, src.ConfigMap.Items, mode, isTrue(src.ConfigMap.Optional))
		case src.Secret != nil:
			part, err = secretPayload(ic, src.Secret.Name, src.Secret.Items, mode, isTrue(src.Secret.Optional))
		case src.DownwardAPI != nil:
			part = map[string]fileProjection{}
			err = downwardPayload(part, f, spec, src.DownwardAPI.Items, mode, ic.Allocatable)
		}
		if err != nil {
			return nil, wrapField(fmt.Sprintf("projected.sources[%d]", i), err)
		}
		for k, v := range part {
			out[k] = v
		}
	}
	return out, nil
}

// containerMounts maps c's volumeMounts (subPathExpr expanded with vars)
// and returns the subPaths to prepare and the mounts of hostPath volumes,
// whose bind source prepare sets to where the volume resolved. Without a
// data dir only hostPath volumes are mounted.
func containerMounts(ic InstanceContext, vols map[string]volumeSetup, c schema.Container, vars *expansion) ([]Mount, []subPathSetup, []hostBind, error) {
	var mounts []Mount
	var subs []subPathSetup
	var binds []hostBind
	for i, vm := range c.VolumeMounts {
		vs, ok := vols[vm.Name]
		if !ok {
			return nil, nil, nil, fmt.Errorf("volumeMounts[%d]: no volume named %q", i, vm.Name)
		}
		sub, err := subPathOf(vm, vars)
		if err != nil {
			return nil, nil, nil, wrapField(fmt.Sprintf("volumeMounts[%d]", i), err)
		}
		if ic.DataDir == "" && vs.hostPath == nil {
			continue
		}
		prop, err := propagationOf(vm.MountPropagation)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("volumeMounts[%d].mountPropagation: %w", i, err)
		}
		m := Mount{Source: vs.root, Target: vm.MountPath, ReadOnly: vm.ReadOnly || vs.writer, Propagation: prop}
		if sub != "" {
			m.Source = filepath.Join(vs.root, sub)
			subs = append(subs, subPathSetup{volume: vm.Name, root: vs.root, sub: sub, expr: vm.SubPathExpr})
		}
		if vs.hostPath != nil {
			binds = append(binds, hostBind{mount: len(mounts), volume: vm.Name, sub: sub})
		}
		mounts = append(mounts, m)
	}
	return mounts, subs, binds, nil
}

// hostBind is a container's mount of a hostPath volume (at index mount of
// its Mounts), with the subPath it binds, if any. The engine must bind
// the path the agent checked, not the manifest's: resolving it again at
// mount time would follow a symlink swapped in after the check.
type hostBind struct {
	mount  int
	volume string
	sub    string
}

// resolvedBinds are where the hostPath volumes of an instance resolved
// when they were prepared: the volume roots by name, and the subPaths by
// volume and subPath.
type resolvedBinds struct {
	roots map[string]string
	subs  map[[2]string]string
}

// source returns the resolved bind source of b.
func (r resolvedBinds) source(b hostBind) (string, bool) {
	if b.sub != "" {
		s, ok := r.subs[[2]string{b.volume, b.sub}]
		return s, ok
	}
	s, ok := r.roots[b.volume]
	return s, ok
}

// subPathOf returns the mount's subPath (subPathExpr expanded), which must
// stay inside the volume. As in the kubelet, a subPathExpr referring to a
// variable that is undefined or empty is a *ConfigError: the instance
// waits until its environment provides it.
func subPathOf(vm schema.VolumeMount, vars *expansion) (string, error) {
	sub, field := vm.SubPath, "subPath"
	if vm.SubPathExpr != "" {
		var missing []string
		var err error
		sub, err = vars.expandWith(vm.SubPathExpr, func(name string) string {
			if vars.vars[name] == "" && !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return vars.vars[name]
		})
		if err == nil {
			err = vars.charge(len(sub))
		}
		if err != nil {
			return "", fmt.Errorf("subPathExpr: %w", err)
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return "", &ConfigError{Message: fmt.Sprintf("volumeMount %q: subPathExpr %q: missing value for %s", vm.Name, vm.SubPathExpr, strings.Join(missing, ", "))}
		}
		field = "subPathExpr"
	}
	if sub == "" {
		return "", nil
	}
	if filepath.IsAbs(sub) || !filepath.IsLocal(sub) {
		written := vm.SubPath
		if field == "subPathExpr" {
			written = vm.SubPathExpr // its expansion may hold a secret
		}
		return "", fmt.Errorf("%s: %q must be a relative path that does not contain '..'", field, written)
	}
	return filepath.Clean(sub), nil
}

func propagationOf(p *string) (string, error) {
	if p == nil {
		return "", nil
	}
	switch *p {
	case "", schema.MountPropagationNone:
		return "", nil
	case schema.MountPropagationHostToContainer:
		return "rslave", nil
	case schema.MountPropagationBidirectional:
		return "rshared", nil
	}
	return "", fmt.Errorf("unsupported %q", *p)
}

// mountError is a volume the agent could not prepare on the host (a
// hostPath type check, a tmpfs it may not mount): the instance waits and
// is retried at the next pass, as a pod stays ContainerCreating.
type mountError struct {
	volume string
	err    error
}

func (e *mountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q: %v", e.volume, e.err)
}

func (e *mountError) Unwrap() error { return e.err }

// prepareVolume makes one volume ready on the host and returns, for a
// hostPath, the path it resolved to (see prepareHostPathVolume).
func prepareVolume(vs volumeSetup, fsGroup *int64, now time.Time, written *writtenVolumes) (resolved string, err error) {
	switch {
	case vs.hostPath != nil:
		resolved, err = prepareHostPathVolume(vs.policy, *vs.hostPath)
	case vs.writer && vs.tmpfs:
		if err = prepareSecretTmpfs(vs.root); err == nil {
			err = written.write(vs.root, vs.payload, fsGroup, now)
		}
	case vs.writer:
		err = written.write(vs.root, vs.payload, fsGroup, now)
	case vs.emptyDir != nil:
		err = prepareEmptyDir(vs.root, *vs.emptyDir, fsGroup)
	}
	if err != nil {
		return "", &mountError{volume: vs.name, err: err}
	}
	return resolved, nil
}

// prepareEmptyDir creates the directory (0777, as the kubelet does), with
// medium Memory a tmpfs of sizeLimit mounted on it, and with fsGroup the
// group ownership of a writable volume. Mode and ownership are set once,
// when the directory (or its tmpfs) is new: what the containers change
// later is theirs.
func prepareEmptyDir(dir string, ed schema.EmptyDirVolumeSource, fsGroup *int64) error {
	fresh := false
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		fresh = true
	}
	switch ed.Medium {
	case schema.StorageMediumDefault:
	case schema.StorageMediumMemory:
		var size int64
		if ed.SizeLimit != nil {
			var err error
			if size, err = parseBytes(*ed.SizeLimit); err != nil {
				return fmt.Errorf("sizeLimit: %w", err)
			}
		}
		mounted, err := mountTmpfs(dir, size)
		if err != nil {
			return err
		}
		fresh = fresh || mounted
	default:
		return fmt.Errorf("emptyDir medium %q is not supported", ed.Medium)
	}
	if !fresh {
		return nil
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	if fsGroup != nil {
		return setGroupOwnership(dir, *fsGroup, false)
	}
	return nil
}

// prepareSubPath creates a missing subPath as a directory with the mode of
// the volume root, as the kubelet does, and refuses one that resolves,
// through symlinks, outside the volume. The directory is created through
// an os.Root on the volume, so a symlink a container planted in its volume
// cannot make the agent create anything outside it (the kubelet's
// doSafeMakeDir); what it creates is checked again after. It returns the
// subPath's resolved path, which is what the engine must bind.
func prepareSubPath(s subPathSetup) (string, error) {
	if err := makeSubPathDir(s); err != nil {
		return "", s.fail(err)
	}
	full := filepath.Join(s.root, s.sub)
	root, err := filepath.EvalSymlinks(s.root)
	if err != nil {
		return "", &mountError{volume: s.volume, err: err}
	}
	resolved, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", s.fail(err)
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		if s.expr != "" {
			return "", s.fail(errors.New("resolves outside the volume"))
		}
		return "", &mountError{volume: s.volume, err: fmt.Errorf("subPath %s resolves to %s, outside the volume", s.sub, resolved)}
	}
	return resolved, nil
}

// makeSubPathDir creates s.sub inside s.root when it is missing, never
// following a symlink out of the volume.
func makeSubPathDir(s subPathSetup) error {
	r, err := os.OpenRoot(s.root)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Lstat(s.sub); !errors.Is(err, fs.ErrNotExist) {
		return nil // present (checked by the caller) or unreadable (reported there)
	}
	info, err := r.Stat(".")
	if err != nil {
		return err
	}
	return r.MkdirAll(s.sub, info.Mode().Perm())
}

// prepareTerminationLog creates the host file bind-mounted at a
// container's terminationMessagePath: empty, mode 0666 so any user in the
// container may write it.
func prepareTerminationLog(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, 0o666)
}

// prepareSecretTmpfs mounts a tmpfs (mode 0755) on a volume directory
// that will hold a Secret, unless one is there. A directory already
// holding files on disk (written before secrets-at-rest: memory was set)
// is emptied first, so no Secret stays beneath the mount.
func prepareSecretTmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if mounted, err := isMounted(dir); err != nil || mounted {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if _, err := mountTmpfs(dir, 0); err != nil {
		return fmt.Errorf("%w (secrets-at-rest: memory keeps secret volumes on a tmpfs)", err)
	}
	return os.Chmod(dir, 0o755)
}

// removePodFiles removes an instance's directory, unmounting its memory
// emptyDirs and its secret volumes' tmpfs first.
func removePodFiles(dataDir, podUID string) error {
	dir := podDir(dataDir, podUID)
	for _, kind := range []string{volumeKindEmptyDir, volumeKindSecret, volumeKindProjected} {
		vols, _ := os.ReadDir(filepath.Join(dir, "volumes", kind))
		for _, e := range vols {
			if err := unmountAll(filepath.Join(dir, "volumes", kind, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}
