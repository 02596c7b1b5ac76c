package edgeagent

import (
	"crypto/sha1" // RFC 4122 name-based (version 5) UUIDs are defined over SHA-1
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// InstanceContext is everything BuildInstance needs to know about one
// instance besides its template: where it runs, what it is, and the config
// objects it may read.
type InstanceContext struct {
	// Node is the node name (spec.nodeName).
	Node string
	// NodeLabels are the labels the agent announces (node.labels['k']).
	NodeLabels map[string]string
	// HostIPs are the node's addresses, status.hostIP first (see
	// HostIPsOf).
	HostIPs []string
	// Allocatable is the node's capacity: the value of a resourceFieldRef
	// limit the container leaves unset, as the kubelet does.
	Allocatable schema.ResourceList
	// DaemonSet is "namespace/name"; Revision the template hash.
	DaemonSet string
	Revision  string
	// ConfigMaps and Secrets are the existing objects of the daemonset's
	// namespace, by name. An absent name does not exist.
	ConfigMaps map[string]schema.ConfigMap
	Secrets    map[string]schema.Secret
	// DataDir is the agent's data directory, under which volumes and
	// termination logs live (see podDir). Empty (Config.Ephemeral) writes no
	// file and mounts nothing but hostPath volumes.
	DataDir string
	// SeccompProfileDir holds Localhost seccomp profiles; empty is
	// DefaultSeccompProfileDir.
	SeccompProfileDir string
	// SecretsInMemory mounts a tmpfs on every volume that holds a Secret
	// (a secret volume, a projected volume with a secret source) before
	// writing it, as the kubelet does, so no Secret reaches the disk
	// (Config.SecretsAtRest).
	SecretsInMemory bool
	// Policy is the device's local policy. Its Check is the caller's; with
	// RestrictHostPaths, BuildInstance also holds a hostPath volume that
	// resolves, through symlinks on the host, outside AllowedHostPaths,
	// before creating anything for it.
	Policy LocalPolicy

	// written, when set, lets BuildInstance skip the config volumes whose
	// payload it last wrote unchanged (the agent's).
	written *writtenVolumes
}

// DefaultSeccompProfileDir is the kubelet's directory of Localhost seccomp
// profiles.
const DefaultSeccompProfileDir = "/var/lib/kubelet/seccomp"

// Namespace returns the daemonset's namespace (metadata.namespace).
func (ic InstanceContext) Namespace() string {
	ns, _, _ := strings.Cut(ic.DaemonSet, "/")
	return ns
}

// PodName returns the instance's stable pod-like name (metadata.name):
// PodName(node, daemonSet).
func (ic InstanceContext) PodName() string { return PodName(ic.Node, ic.DaemonSet) }

// PodUID returns the instance's uid (metadata.uid): PodUID(node,
// daemonSet, revision).
func (ic InstanceContext) PodUID() string { return PodUID(ic.Node, ic.DaemonSet, ic.Revision) }

// podNameAlphabet is the alphabet of Kubernetes' generated name suffixes
// (no vowels, no confusable characters).
const podNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// maxPodNamePrefix is Kubernetes' limit on a generateName prefix: the
// name stays within 63 characters with its 5-character suffix.
const maxPodNamePrefix = 58

// PodName returns the stable name of daemonSet's instance on node:
// "<daemonset name>-<suffix>", where the suffix is 5 characters of
// Kubernetes' generated-name alphabet derived from a SHA-256 of the node
// name. It is the same for every revision, as long as a Kubernetes pod
// name, and differs between nodes (up to collisions of the suffix).
func PodName(node, daemonSet string) string {
	_, name, _ := strings.Cut(daemonSet, "/")
	prefix := name + "-"
	if len(prefix) > maxPodNamePrefix {
		prefix = prefix[:maxPodNamePrefix]
	}
	sum := sha256.Sum256([]byte(node))
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = podNameAlphabet[int(sum[i])%len(podNameAlphabet)]
	}
	return prefix + string(suffix)
}

// podUIDNamespace is the RFC 4122 namespace of edgeset's instance uids.
var podUIDNamespace = [16]byte{0x6b, 0x3e, 0x1c, 0x52, 0x0f, 0x9a, 0x4e, 0x27, 0x8d, 0x61, 0x25, 0xc4, 0x7a, 0x90, 0x13, 0xee}

// PodUID returns the uid of the instance of daemonSet at revision on node:
// a name-based (version 5) UUID of the three, so it survives agent
// restarts and a new revision is a new uid, as a new pod is in Kubernetes.
func PodUID(node, daemonSet, revision string) string {
	h := sha1.New()
	h.Write(podUIDNamespace[:])
	h.Write([]byte(node + "\x00" + daemonSet + "\x00" + revision))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// HostIPsOf returns the node's addresses with status.hostIP first: the
// first InternalIP, else the first address; then every other address.
// Hostname entries are not IPs and are left out unless nothing else is
// known.
func HostIPsOf(addrs []schema.NodeAddress) []string {
	var internal, other, names []string
	for _, a := range addrs {
		switch a.Type {
		case "InternalIP":
			internal = append(internal, a.Address)
		case "Hostname", "InternalDNS", "ExternalDNS":
			names = append(names, a.Address)
		default:
			other = append(other, a.Address)
		}
	}
	out := append(internal, other...)
	if len(out) == 0 {
		return names
	}
	return out
}

// podFields are the values of the downward API for one instance.
type podFields struct {
	name, namespace, uid  string
	labels, annotations   map[string]string
	nodeName, serviceAcct string
	hostIPs, podIPs       []string
	nodeLabels            map[string]string
}

func newPodFields(ic InstanceContext, t schema.PodTemplateSpec) podFields {
	f := podFields{
		name: ic.PodName(), namespace: ic.Namespace(), uid: ic.PodUID(),
		labels: t.Metadata.Labels, annotations: t.Metadata.Annotations,
		nodeName: ic.Node, serviceAcct: t.Spec.ServiceAccountName,
		hostIPs: ic.HostIPs, nodeLabels: ic.NodeLabels,
	}
	if t.Spec.HostNetwork {
		// Without host networking the instance's address is only known once
		// its first container runs, after the environment is fixed.
		f.podIPs = ic.HostIPs
	}
	return f
}

// fieldValue returns the value of a downward API fieldPath, formatted as
// the kubelet does (maps as sorted key="value" lines, lists comma
// separated, a missing label or annotation empty).
func (f podFields) fieldValue(path string) (string, error) {
	if base, key, ok := splitSubscript(path); ok {
		switch base {
		case "metadata.labels":
			return f.labels[key], nil
		case "metadata.annotations":
			return f.annotations[key], nil
		case "node.labels":
			return f.nodeLabels[key], nil
		}
		return "", fmt.Errorf("unsupported fieldPath %q", path)
	}
	switch path {
	case "metadata.name":
		return f.name, nil
	case "metadata.namespace":
		return f.namespace, nil
	case "metadata.uid":
		return f.uid, nil
	case "metadata.labels":
		return formatMap(f.labels), nil
	case "metadata.annotations":
		return formatMap(f.annotations), nil
	case "spec.nodeName":
		return f.nodeName, nil
	case "spec.serviceAccountName":
		return f.serviceAcct, nil
	case "status.hostIP":
		return first(f.hostIPs), nil
	case "status.hostIPs":
		return strings.Join(f.hostIPs, ","), nil
	case "status.podIP":
		return first(f.podIPs), nil
	case "status.podIPs":
		return strings.Join(f.podIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// splitSubscript splits "base['key']" as Kubernetes'
// fieldpath.SplitMaybeSubscriptedPath does.
func splitSubscript(path string) (base, key string, ok bool) {
	s, found := strings.CutSuffix(path, "']")
	if !found {
		return path, "", false
	}
	base, key, found = strings.Cut(s, "['")
	if !found || base == "" {
		return path, "", false
	}
	return base, key, true
}

// formatMap formats labels or annotations as Kubernetes' fieldpath.FormatMap:
// one key="value" line per key, sorted, values Go-quoted, no final newline.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		lines = append(lines, fmt.Sprintf("%v=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}
