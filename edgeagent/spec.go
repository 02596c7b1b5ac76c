package edgeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// LabelStopGrace records the template's termination grace period (whole
// seconds) on each container, so a leftover container whose template is no
// longer cached is still stopped with the grace it was created with.
const LabelStopGrace = "io.edgeset.stop-grace"

// DefaultStopGrace is Kubernetes' default terminationGracePeriodSeconds.
const DefaultStopGrace = 30 * time.Second

// maxNameLen keeps container names well under Docker's practical limits.
const maxNameLen = 180

// ContainerName returns the deterministic engine name of one container of an
// instance: "es_<node>_<namespace>_<name>_<container>_<rev8>", each part
// reduced to Docker's name charset. '_' never occurs in Kubernetes names, so
// the parts stay unambiguous. Over-long names are cut and suffixed with a
// hash of the full name.
func ContainerName(node, daemonSet, revision, container string) string {
	ns, name, _ := strings.Cut(daemonSet, "/")
	rev := revision
	if len(rev) > 8 {
		rev = rev[:8]
	}
	parts := []string{"es", node, ns, name, container, rev}
	for i, p := range parts {
		parts[i] = sanitizeName(p)
	}
	full := strings.Join(parts, "_")
	if len(full) <= maxNameLen {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return full[:maxNameLen-13] + "_" + hex.EncodeToString(sum[:])[:12]
}

// sanitizeName maps every byte outside [a-zA-Z0-9.-] to '-'. Empty parts
// become "x" so every part starts with an allowed character.
func sanitizeName(s string) string {
	if s == "" {
		return "x"
	}
	b := []byte(s)
	for i, c := range b {
		if !isNameChar(c) {
			b[i] = '-'
		}
	}
	return string(b)
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-'
}

// InstanceSpec is every container of one instance, as BuildInstance builds
// it.
type InstanceSpec struct {
	// Init are the init containers in template order. Those with
	// restartPolicy Always (sidecars) keep running beside Containers.
	Init []ContainerSpec
	// Containers are the main containers in template order.
	Containers []ContainerSpec
}

// BuildInstance maps a revision's template to every container of one
// instance and, when ic.DataDir is set, prepares what they mount on the
// host: configMap, secret, downwardAPI and projected volumes written (or
// updated in place) the kubelet's atomic way, emptyDirs created (tmpfs for
// medium Memory), hostPath types applied, subPaths created and checked,
// and one empty termination-log file per container. Calling it again for a
// running instance is how changed config objects reach its files; it
// never changes what a created container was given.
//
// A missing ConfigMap, Secret or key that is not optional is a
// *ConfigError with the kubelet's message; a volume that cannot be
// prepared on the host is an error naming it ("MountVolume.SetUp failed
// for volume ..."), to retry later; any other error names the template
// field.
func BuildInstance(ic InstanceContext, t schema.PodTemplateSpec) (InstanceSpec, error) {
	p, err := planInstance(ic, t)
	if err != nil {
		return InstanceSpec{}, err
	}
	if ic.DataDir != "" {
		// Secret files live below: only the agent may traverse.
		if err := os.MkdirAll(filepath.Join(ic.DataDir, "pods"), 0o700); err != nil {
			return InstanceSpec{}, fmt.Errorf("instance files: %w", err)
		}
		if err := p.prepare(time.Now()); err != nil {
			return InstanceSpec{}, err
		}
	} else if err := p.checkHostPaths(); err != nil {
		return InstanceSpec{}, err
	}
	return p.spec, nil
}

// BuildSpecs returns the main containers BuildInstance builds for node,
// daemonSet and revision with nothing else known: no config objects, no
// node addresses, no data dir (so no file is written or mounted).
func BuildSpecs(node, daemonSet, revision string, t schema.PodTemplateSpec) ([]ContainerSpec, error) {
	spec, err := BuildInstance(InstanceContext{Node: node, DaemonSet: daemonSet, Revision: revision}, t)
	return spec.Containers, err
}

// instancePlan is an instance's containers and what to prepare on the
// host for them, computed without I/O.
type instancePlan struct {
	spec     InstanceSpec
	volumes  []volumeSetup
	fsGroup  *int64
	subPaths []subPathSetup
	termLogs []string
	// lockDir is the instance's update lock directory, when its template
	// opts in (lockfile.go).
	lockDir string
	written *writtenVolumes
	// binds are the hostPath mounts of each container, by container name.
	binds map[string][]hostBind
}

// planInstance computes the instance's containers and host preparations.
func planInstance(ic InstanceContext, t schema.PodTemplateSpec) (instancePlan, error) {
	fail := func(err error) (instancePlan, error) {
		if _, ok := err.(*ConfigError); ok {
			return instancePlan{}, err
		}
		return instancePlan{}, fmt.Errorf("template of %s revision %s: %w", ic.DaemonSet, ic.Revision, err)
	}
	if len(t.Spec.Containers) == 0 {
		return fail(errors.New("spec.containers is empty"))
	}
	f := newPodFields(ic, t)
	vols, err := planVolumes(ic, f, t.Spec)
	if err != nil {
		return fail(err)
	}
	b := &containerBuilder{ic: ic, t: t, vols: vols, grace: stopGrace(t.Spec), env: envResolver{ic: ic, fields: f, spec: t.Spec}}
	p := instancePlan{written: ic.written, binds: map[string][]hostBind{}}
	if t.Spec.SecurityContext != nil {
		p.fsGroup = t.Spec.SecurityContext.FSGroup
	}
	for _, v := range t.Spec.Volumes {
		p.volumes = append(p.volumes, vols[v.Name])
	}
	for i, c := range t.Spec.InitContainers {
		s, err := b.build(&p, fmt.Sprintf("spec.initContainers[%d]", i), c, i)
		if err != nil {
			return fail(err)
		}
		delete(s.Labels, LabelIndex)
		s.Labels[LabelInitIndex] = strconv.Itoa(i)
		p.spec.Init = append(p.spec.Init, s)
	}
	for i, c := range t.Spec.Containers {
		s, err := b.build(&p, fmt.Sprintf("spec.containers[%d]", i), c, i)
		if err != nil {
			return fail(err)
		}
		p.spec.Containers = append(p.spec.Containers, s)
	}
	return p, nil
}

// prepare makes every volume, subPath and termination log ready on the
// host, in that order, and binds each hostPath mount where its volume (or
// subPath) resolved.
func (p *instancePlan) prepare(now time.Time) error {
	r := resolvedBinds{roots: map[string]string{}, subs: map[[2]string]string{}}
	for _, v := range p.volumes {
		resolved, err := prepareVolume(v, p.fsGroup, now, p.written)
		if err != nil {
			return err
		}
		if v.hostPath != nil {
			r.roots[v.name] = resolved
		}
	}
	for _, s := range p.subPaths {
		if root, ok := r.roots[s.volume]; ok {
			s.root = root
		}
		resolved, err := prepareSubPath(s)
		if err != nil {
			return err
		}
		r.subs[[2]string{s.volume, s.sub}] = resolved
	}
	for _, path := range p.termLogs {
		if err := prepareTerminationLog(path); err != nil {
			return fmt.Errorf("termination log %s: %w", path, err)
		}
	}
	if p.lockDir != "" {
		if err := prepareLockDir(p.lockDir); err != nil {
			return err
		}
	}
	p.bindResolved(r)
	return nil
}

// checkHostPaths is prepare for an agent without a data dir: it creates
// nothing, and with RestrictHostPaths holds a hostPath that resolves
// outside the allowed paths and binds the others where they resolve.
func (p *instancePlan) checkHostPaths() error {
	r := resolvedBinds{roots: map[string]string{}, subs: map[[2]string]string{}}
	for _, v := range p.volumes {
		if v.hostPath == nil {
			continue
		}
		resolved, err := checkHostPathVolume(v.policy, *v.hostPath)
		if err != nil {
			return &mountError{volume: v.name, err: err}
		}
		r.roots[v.name] = resolved
	}
	for _, s := range p.subPaths {
		if root, ok := r.roots[s.volume]; ok {
			r.subs[[2]string{s.volume, s.sub}] = filepath.Join(root, s.sub)
		}
	}
	p.bindResolved(r)
	return nil
}

// bindResolved sets the source of every hostPath mount to where r says it
// resolved.
func (p *instancePlan) bindResolved(r resolvedBinds) {
	for _, list := range [][]ContainerSpec{p.spec.Init, p.spec.Containers} {
		for i := range list {
			for _, b := range p.binds[list[i].Name] {
				if src, ok := r.source(b); ok {
					list[i].Mounts[b.mount].Source = src
				}
			}
		}
	}
}

// containerBuilder builds the ContainerSpecs of one instance.
type containerBuilder struct {
	ic    InstanceContext
	t     schema.PodTemplateSpec
	vols  map[string]volumeSetup
	grace time.Duration
	env   envResolver
}

// build maps container c (at path, index i of its list) and records its
// subPaths and termination log in p.
func (b *containerBuilder) build(p *instancePlan, path string, c schema.Container, i int) (ContainerSpec, error) {
	wrap := func(err error) error { return wrapField(fmt.Sprintf("%s (%s)", path, c.Name), err) }
	env, vars, err := b.env.resolve(path, c)
	if err != nil {
		return ContainerSpec{}, err
	}
	entrypoint, err := vars.expandAll("command", c.Command)
	if err != nil {
		return ContainerSpec{}, wrap(err)
	}
	cmd, err := vars.expandAll("args", c.Args)
	if err != nil {
		return ContainerSpec{}, wrap(err)
	}
	ic, spec := b.ic, b.t.Spec
	s := ContainerSpec{
		Name:        ContainerName(ic.Node, ic.DaemonSet, ic.Revision, c.Name),
		Image:       c.Image,
		Labels:      containerLabels(ic, c.Name, i, b.grace),
		Entrypoint:  entrypoint,
		Cmd:         cmd,
		Env:         env,
		HostNetwork: spec.HostNetwork,
		HostPID:     spec.HostPID,
		StopTimeout: b.grace,
		WorkingDir:  c.WorkingDir,
		PullAuth:    pullAuthFor(c.Image, spec.ImagePullSecrets, ic.Secrets),
	}
	seccompDir := ic.SeccompProfileDir
	if seccompDir == "" {
		seccompDir = DefaultSeccompProfileDir
	}
	if err := applySecurity(&s, spec, c, seccompDir); err != nil {
		return ContainerSpec{}, wrap(err)
	}
	if !spec.HostNetwork {
		s.Ports = portBindings(c.Ports)
		s.Hostname = ic.PodName()
	}
	mounts, subs, binds, err := containerMounts(ic, b.vols, c, vars)
	if err != nil {
		return ContainerSpec{}, wrap(err)
	}
	s.Mounts = mounts
	p.subPaths = append(p.subPaths, subs...)
	p.binds[s.Name] = binds
	if ic.DataDir != "" {
		logPath := terminationLogPath(ic.DataDir, ic.PodUID(), c.Name)
		target := c.TerminationMessagePath
		if target == "" {
			target = schema.DefaultTerminationMessagePath
		}
		s.Mounts = append(s.Mounts, Mount{Source: logPath, Target: target})
		p.termLogs = append(p.termLogs, logPath)
		if b.t.UpdateLockEnabled() {
			p.lockDir = updateLockDir(ic.DataDir, ic.PodUID())
			s.Mounts = append(s.Mounts, Mount{Source: p.lockDir, Target: schema.UpdateLockDir})
		}
	}
	if s.NanoCPUs, s.Memory, err = limits(c.Resources.Limits); err != nil {
		return ContainerSpec{}, wrap(err)
	}
	return s, nil
}

// SharesNetwork reports whether the containers after the first join the
// first one's network namespace.
func SharesNetwork(t schema.PodTemplateSpec) bool {
	return !t.Spec.HostNetwork && len(t.Spec.Containers) > 1
}

func stopGrace(p schema.PodSpec) time.Duration {
	if p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds < 0 {
		return DefaultStopGrace
	}
	return time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
}

func containerLabels(ic InstanceContext, container string, i int, grace time.Duration) map[string]string {
	return map[string]string{
		LabelManaged:   "true",
		LabelNode:      ic.Node,
		LabelDaemonSet: ic.DaemonSet,
		LabelRevision:  ic.Revision,
		LabelContainer: container,
		LabelIndex:     strconv.Itoa(i),
		LabelStopGrace: strconv.FormatInt(int64(grace/time.Second), 10),
		LabelPodName:   ic.PodName(),
		LabelPodUID:    ic.PodUID(),
	}
}

func portBindings(ports []schema.ContainerPort) []PortBinding {
	var out []PortBinding
	for _, p := range ports {
		if p.HostPort == 0 {
			continue
		}
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		out = append(out, PortBinding{ContainerPort: int(p.ContainerPort), HostPort: int(p.HostPort), HostIP: p.HostIP, Protocol: proto})
	}
	return out
}

func limits(l schema.ResourceList) (nanoCPUs, memory int64, err error) {
	if q, ok := l["cpu"]; ok {
		if nanoCPUs, err = parseNanoCPUs(q); err != nil {
			return 0, 0, fmt.Errorf("resources.limits.cpu: %w", err)
		}
	}
	if q, ok := l["memory"]; ok {
		if memory, err = parseBytes(q); err != nil {
			return 0, 0, fmt.Errorf("resources.limits.memory: %w", err)
		}
	}
	return nanoCPUs, memory, nil
}
