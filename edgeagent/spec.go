package edgeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// instance. A missing config object is a *ConfigError.
//
// LIFECYCLE STUB (w12-lifecycle): until the agent-config engineer's
// BuildInstance lands, init containers are built like main containers
// with LabelInitIndex instead of LabelIndex, and every container carries
// a deterministic LabelPodUID. The lead keeps the agent-config version.
func BuildInstance(node, daemonSet, revision string, t schema.PodTemplateSpec) (InstanceSpec, error) {
	main, err := BuildSpecs(node, daemonSet, revision, t)
	if err != nil {
		return InstanceSpec{}, err
	}
	initTmpl := t
	initTmpl.Spec.Containers = t.Spec.InitContainers
	grace := stopGrace(t.Spec)
	var init []ContainerSpec
	for i, c := range t.Spec.InitContainers {
		s, err := buildSpec(node, daemonSet, revision, initTmpl.Spec, i, grace)
		if err != nil {
			return InstanceSpec{}, fmt.Errorf("template of %s revision %s: spec.initContainers[%d] (%s): %w", daemonSet, revision, i, c.Name, err)
		}
		delete(s.Labels, LabelIndex)
		s.Labels[LabelInitIndex] = strconv.Itoa(i)
		init = append(init, s)
	}
	sum := sha256.Sum256([]byte(node + "\x00" + daemonSet + "\x00" + revision))
	uid := hex.EncodeToString(sum[:16])
	for _, specs := range [][]ContainerSpec{init, main} {
		for _, s := range specs {
			s.Labels[LabelPodUID] = uid
		}
	}
	return InstanceSpec{Init: init, Containers: main}, nil
}

// BuildSpecs maps a revision's template to the containers of one instance on
// node, in template order. It is pure: NetworkOf is left empty and is filled
// in at create time with the id of the first container when containers share
// its network namespace (see SharesNetwork).
func BuildSpecs(node, daemonSet, revision string, t schema.PodTemplateSpec) ([]ContainerSpec, error) {
	if len(t.Spec.Containers) == 0 {
		return nil, fmt.Errorf("template of %s revision %s: spec.containers is empty", daemonSet, revision)
	}
	grace := stopGrace(t.Spec)
	specs := make([]ContainerSpec, 0, len(t.Spec.Containers))
	for i, c := range t.Spec.Containers {
		s, err := buildSpec(node, daemonSet, revision, t.Spec, i, grace)
		if err != nil {
			return nil, fmt.Errorf("template of %s revision %s: spec.containers[%d] (%s): %w", daemonSet, revision, i, c.Name, err)
		}
		specs = append(specs, s)
	}
	return specs, nil
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

func buildSpec(node, daemonSet, revision string, p schema.PodSpec, i int, grace time.Duration) (ContainerSpec, error) {
	c := p.Containers[i]
	s := ContainerSpec{
		Name:        ContainerName(node, daemonSet, revision, c.Name),
		Image:       c.Image,
		Labels:      containerLabels(node, daemonSet, revision, c.Name, i, grace),
		Entrypoint:  cloneStrings(c.Command),
		Cmd:         cloneStrings(c.Args),
		Env:         envList(c.Env),
		HostNetwork: p.HostNetwork,
		HostPID:     p.HostPID,
		Privileged:  c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged,
		StopTimeout: grace,
	}
	if !p.HostNetwork {
		s.Ports = portBindings(c.Ports)
	}
	var err error
	if s.Mounts, err = mounts(c.VolumeMounts, p.Volumes); err != nil {
		return ContainerSpec{}, err
	}
	if s.NanoCPUs, s.Memory, err = limits(c.Resources.Limits); err != nil {
		return ContainerSpec{}, err
	}
	return s, nil
}

func containerLabels(node, daemonSet, revision, container string, i int, grace time.Duration) map[string]string {
	return map[string]string{
		LabelManaged:   "true",
		LabelNode:      node,
		LabelDaemonSet: daemonSet,
		LabelRevision:  revision,
		LabelContainer: container,
		LabelIndex:     strconv.Itoa(i),
		LabelStopGrace: strconv.FormatInt(int64(grace/time.Second), 10),
	}
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func envList(env []schema.EnvVar) []string {
	if len(env) == 0 {
		return nil
	}
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
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

func mounts(vms []schema.VolumeMount, vols []schema.Volume) ([]Mount, error) {
	var out []Mount
	for i, vm := range vms {
		src, ok := hostPathOf(vols, vm.Name)
		if !ok {
			return nil, fmt.Errorf("volumeMounts[%d]: no hostPath volume named %q", i, vm.Name)
		}
		out = append(out, Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	return out, nil
}

func hostPathOf(vols []schema.Volume, name string) (string, bool) {
	for _, v := range vols {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path, true
		}
	}
	return "", false
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
