package schema

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ignoredField is a Kubernetes field that edgeset accepts and drops with a
// warning because it has no meaning on an edge device, or (keep) decodes
// but still warns because it is only partly honoured. path uses "[*]" for
// any list index; a path ending in ".*" matches every field of that object
// that edgeset's types lack.
type ignoredField struct {
	path string
	// reason is one sentence saying what changes for the daemon.
	reason string
	class  WarningClass
	// dropItem drops the whole enclosing list item (an env var whose value
	// cannot be provided is not set at all).
	dropItem bool
	// keep decodes the field (it is one of edgeset's) and warns anyway.
	keep bool
	// forbidden makes the field an error with reason as its message:
	// Kubernetes rejects it in a DaemonSet too.
	forbidden bool
	// noop is the value (Kubernetes' default, as YAML text) for which
	// dropping the field changes nothing: it is dropped without a warning.
	noop string
}

// Warning message prefixes: a dropped field, and a kept field that is only
// partly honoured.
const (
	prefixIgnored = "ignored: "
	prefixPartial = "partly honoured: "
)

// Reasons shared by several fields.
const (
	reasonServerSet      = "set by the Kubernetes API server; edgeset ignores it"
	reasonStatus         = "status is observed by edgeset, not declared"
	reasonPodAffinity    = "inter-pod affinity places pods relative to other pods; a daemon runs on every matching device regardless"
	reasonAttach         = "standard input is attached through the Kubernetes API (kubectl attach); a daemon on a device gets none"
	reasonProbeGrace     = "a container killed by this probe gets the pod's terminationGracePeriodSeconds, not this probe-level value"
	reasonSELinux        = "no SELinux label is set: the containers get the engine's default label"
	reasonAppArmor       = "no AppArmor profile is set: the containers get the engine's default profile (docker-default), not this one"
	reasonWindows        = "Windows options have no effect on a Linux device, as on a Linux Kubernetes node"
	reasonGRPC           = "gRPC probes are not supported on edge devices yet: use an exec probe running grpc_health_probe, or httpGet/tcpSocket"
	reasonKubeAPIProject = "needs the Kubernetes API (tokens and certificates it issues); the source is dropped and its files are not written"
)

// metadataIgnored are the server-populated ObjectMeta fields.
var metadataIgnored = []string{
	"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
	"ownerReferences", "finalizers", "generateName", "selfLink",
	"deletionTimestamp", "deletionGracePeriodSeconds",
}

// podSpecIgnored are the PodSpec fields edgeset does not honour, relative to
// the pod spec.
var podSpecIgnored = []ignoredField{
	{path: "serviceAccountName", keep: true, class: WarningKubernetesOnly,
		reason: "no service account token is mounted (a device has no Kubernetes API); the name is kept only for fieldRef spec.serviceAccountName"},
	{path: "serviceAccount", class: WarningKubernetesOnly,
		reason: "deprecated alias of serviceAccountName; no service account token is mounted on a device"},
	{path: "automountServiceAccountToken", class: WarningKubernetesOnly, noop: "false",
		reason: "nothing is mounted at /var/run/secrets/kubernetes.io/serviceaccount: a device has no Kubernetes API to call"},
	{path: "ephemeralContainers", class: WarningKubernetesOnly,
		reason: "ephemeral containers are added through the Kubernetes API (kubectl debug); none are run"},
	{path: "priorityClassName", class: WarningKubernetesOnly,
		reason: "priority classes order Kubernetes scheduling and preemption; edgeset runs the daemon on every matching device and preempts nothing"},
	{path: "priority", class: WarningKubernetesOnly,
		reason: "pod priority orders Kubernetes scheduling and preemption, which edgeset does not do"},
	{path: "preemptionPolicy", class: WarningKubernetesOnly,
		reason: "edgeset never evicts other daemons to make room, so there is no preemption to configure"},
	{path: "schedulerName", class: WarningKubernetesOnly,
		reason: "edgeset places daemons itself; no other scheduler is consulted"},
	{path: "nodeName", class: WarningKubernetesOnly,
		reason: "edgeset picks the devices from the selector, affinity and tolerations; a node name in the template does not pin the daemon"},
	{path: "topologySpreadConstraints", class: WarningKubernetesOnly,
		reason: "a daemon runs once per device, so there is nothing to spread over topology domains"},
	{path: "schedulingGroup", class: WarningKubernetesOnly,
		reason: "gang scheduling groups pods for the Kubernetes scheduler; edgeset starts each instance on its own device"},
	{path: "schedulingGates", class: WarningKubernetesOnly,
		reason: "scheduling gates are lifted through the Kubernetes API; edgeset places the daemon at once"},
	{path: "readinessGates", class: WarningKubernetesOnly,
		reason: "readiness gates are set by Kubernetes controllers; readiness comes from the containers' probes only"},
	{path: "dnsPolicy", class: WarningKubernetesOnly,
		reason: "cluster DNS needs Kubernetes services; the containers use the device's resolver"},
	{path: "subdomain", class: WarningKubernetesOnly,
		reason: "a pod subdomain needs a headless Kubernetes service; no DNS name is registered"},
	{path: "setHostnameAsFQDN", class: WarningKubernetesOnly, noop: "false",
		reason: "the FQDN comes from a Kubernetes service subdomain, which a device does not have"},
	{path: "enableServiceLinks", class: WarningKubernetesOnly, noop: "false",
		reason: "no Kubernetes service variables ({SVC}_SERVICE_HOST) are injected on a device"},
	{path: "overhead", class: WarningKubernetesOnly,
		reason: "pod overhead is accounted by the Kubernetes scheduler for runtime classes; nothing is reserved on a device"},
	{path: "os", class: WarningKubernetesOnly,
		reason: "os.name only feeds Kubernetes admission; placement uses the node labels (kubernetes.io/os in a nodeSelector)"},
	{path: "resourceClaims", class: WarningKubernetesOnly,
		reason: "dynamic resource allocation needs the Kubernetes resource API; no claimed device is attached"},
	{path: "affinity.podAffinity", class: WarningKubernetesOnly, reason: reasonPodAffinity},
	{path: "affinity.podAntiAffinity", class: WarningKubernetesOnly, reason: reasonPodAffinity},
	{path: "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", class: WarningKubernetesOnly,
		reason: "preferred node affinity only ranks nodes; a daemon runs on every node that matches the required terms"},

	{path: "activeDeadlineSeconds", forbidden: true,
		reason: "not allowed in a DaemonSet, as in Kubernetes: a daemon runs until it is replaced"},
	{path: "dnsConfig",
		reason: "these nameservers, search domains and resolver options are not applied; the containers use the device's resolver"},
	{path: "hostname",
		reason: "the containers' hostname is not set to this value (it is the device's with hostNetwork, the engine's otherwise)"},
	{path: "hostnameOverride",
		reason: "the containers' hostname is not set to this value (it is the device's with hostNetwork, the engine's otherwise)"},
	{path: "hostAliases",
		reason: "these entries are not added to the containers' /etc/hosts"},
	{path: "hostIPC", noop: "false",
		reason: "the containers do not join the device's IPC namespace: shared memory and semaphores of host processes are not visible"},
	{path: "hostUsers", noop: "true",
		reason: "user namespaces are not configured: container user IDs are the device's"},
	{path: "shareProcessNamespace", noop: "false",
		reason: "the containers of an instance do not see each other's processes"},
	{path: "runtimeClassName",
		reason: "the device's default container runtime runs the containers, not this runtime class"},
	{path: "resources",
		reason: "pod-level requests and limits are not enforced; only each container's resources are"},
	{path: "securityContext.seLinuxOptions", reason: reasonSELinux},
	{path: "securityContext.seLinuxChangePolicy", reason: "volumes are not relabelled for SELinux"},
	{path: "securityContext.appArmorProfile", reason: reasonAppArmor},
	{path: "securityContext.supplementalGroupsPolicy",
		reason: "the image's /etc/group memberships are always merged in (policy Merge); Strict is not enforced"},
	{path: "securityContext.windowsOptions", class: WarningKubernetesOnly, reason: reasonWindows},
}

// containerIgnored are the Container fields edgeset does not honour,
// relative to an init or main container.
var containerIgnored = []ignoredField{
	{path: "stdin", class: WarningKubernetesOnly, reason: reasonAttach, noop: "false"},
	{path: "stdinOnce", class: WarningKubernetesOnly, reason: reasonAttach, noop: "false"},
	{path: "resizePolicy", class: WarningKubernetesOnly,
		reason: "in-place resizing is a Kubernetes API operation; on a device changed resources make a new revision"},
	{path: "resources.claims", class: WarningKubernetesOnly,
		reason: "dynamic resource claims need the Kubernetes resource API; the claimed devices are not attached"},
	{path: "securityContext.windowsOptions", class: WarningKubernetesOnly, reason: reasonWindows},

	{path: "tty", noop: "false",
		reason: "the container gets no terminal: programs that colour or line-buffer their output for a terminal behave as in a pipe"},
	{path: "restartPolicyRules",
		reason: "restart rules by exit code are not applied; the container restarts as its restartPolicy says"},
	{path: "volumeDevices",
		reason: "raw block devices come from persistent volume claims, which a device does not provide; the device files are not created"},
	{path: "securityContext.seLinuxOptions", reason: reasonSELinux},
	{path: "securityContext.appArmorProfile", reason: reasonAppArmor},
	{path: "volumeMounts[*].recursiveReadOnly", noop: "Disabled",
		reason: "mounts below this read-only mount stay writable: only the mount itself is made read-only"},
	{path: "livenessProbe.terminationGracePeriodSeconds", reason: reasonProbeGrace},
	{path: "startupProbe.terminationGracePeriodSeconds", reason: reasonProbeGrace},
	{path: "readinessProbe.terminationGracePeriodSeconds", reason: reasonProbeGrace},
	{path: "livenessProbe.grpc", forbidden: true, reason: reasonGRPC},
	{path: "readinessProbe.grpc", forbidden: true, reason: reasonGRPC},
	{path: "startupProbe.grpc", forbidden: true, reason: reasonGRPC},
	{path: "lifecycle.stopSignal",
		reason: "the container is stopped with the image's STOPSIGNAL (SIGTERM by default), not this signal"},
	{path: "env[*].valueFrom.fileKeyRef", dropItem: true,
		reason: "values read from a file of a volume (fileKeyRef) are not supported; the variable is not set"},
}

// droppedVolumeKinds are the Kubernetes volume sources a device does not
// provide, each with what the daemon loses. A volume of one of these kinds
// is dropped with its mounts.
var droppedVolumeKinds = map[string]string{
	"persistentVolumeClaim": "persistent volume claims need Kubernetes storage provisioning",
	"ephemeral":             "generic ephemeral volumes are persistent volume claims made by Kubernetes",
	"csi":                   "CSI drivers are driven by the Kubernetes volume API",
	"nfs":                   "network filesystems are not mounted by edgeset (mount it on the device and use a hostPath)",
	"iscsi":                 "iSCSI disks are not attached by edgeset",
	"local":                 "local persistent volumes need Kubernetes storage provisioning (use a hostPath)",
	"image":                 "image volumes are not mounted on a device",
	"gitRepo":               "gitRepo volumes are deprecated in Kubernetes (clone in an init container into an emptyDir)",
	"awsElasticBlockStore":  "cloud disks are not attached to a device",
	"gcePersistentDisk":     "cloud disks are not attached to a device",
	"azureDisk":             "cloud disks are not attached to a device",
	"azureFile":             "cloud file shares are not mounted on a device",
	"cephfs":                "network filesystems are not mounted by edgeset",
	"cinder":                "cloud disks are not attached to a device",
	"fc":                    "fibre channel disks are not attached by edgeset",
	"flexVolume":            "flex volume drivers are driven by the kubelet",
	"flocker":               "flocker volumes are not attached by edgeset",
	"glusterfs":             "network filesystems are not mounted by edgeset",
	"photonPersistentDisk":  "cloud disks are not attached to a device",
	"portworxVolume":        "portworx volumes are not attached by edgeset",
	"quobyte":               "network filesystems are not mounted by edgeset",
	"rbd":                   "Ceph block devices are not attached by edgeset",
	"scaleIO":               "ScaleIO volumes are not attached by edgeset",
	"storageos":             "StorageOS volumes are not attached by edgeset",
	"vsphereVolume":         "cloud disks are not attached to a device",
}

// providedVolumeKinds are the volume sources edgeset provides.
var providedVolumeKinds = []string{"hostPath", "emptyDir", "configMap", "secret", "projected", "downwardAPI"}

// daemonSetIgnored is the table of Kubernetes DaemonSet fields that Decode
// accepts and drops (or keeps) with a warning.
var daemonSetIgnored = buildDaemonSetIgnored()

// configIgnored is the table for ConfigMap and Secret objects. Kubernetes'
// config objects have no status; edgesetctl get -o yaml prints edgeset's
// (hash, keys, nodes) there, and it is ignored so the export applies.
var configIgnored = append(buildMetadataIgnored("metadata."),
	ignoredField{path: "status", reason: reasonStatus, class: WarningKubernetesOnly})

func buildMetadataIgnored(prefixes ...string) []ignoredField {
	var t []ignoredField
	for _, p := range prefixes {
		for _, f := range metadataIgnored {
			t = append(t, ignoredField{path: p + f, reason: reasonServerSet, class: WarningKubernetesOnly})
		}
	}
	return t
}

func buildDaemonSetIgnored() []ignoredField {
	t := buildMetadataIgnored("metadata.", "spec.template.metadata.")
	t = append(t,
		ignoredField{path: "status", reason: reasonStatus, class: WarningKubernetesOnly},
		ignoredField{path: "spec.templateGeneration", reason: reasonServerSet, class: WarningKubernetesOnly})
	const pod = "spec.template.spec."
	for _, f := range podSpecIgnored {
		f.path = pod + f.path
		t = append(t, f)
	}
	for _, list := range []string{"containers[*].", "initContainers[*]."} {
		for _, f := range containerIgnored {
			f.path = pod + list + f.path
			t = append(t, f)
		}
	}
	for _, src := range []string{"serviceAccountToken", "clusterTrustBundle", "podCertificate"} {
		t = append(t, ignoredField{
			path:     pod + "volumes[*].projected.sources[*]." + src,
			reason:   "projected " + src + " " + reasonKubeAPIProject,
			class:    WarningKubernetesOnly,
			dropItem: true,
		})
	}
	sort.Slice(t, func(i, j int) bool { return t[i].path < t[j].path })
	return t
}

// matchIgnored finds the table entry for the input path src.
func matchIgnored(table []ignoredField, src string) (ignoredField, bool) {
	generic := indexPattern.ReplaceAllString(src, "[*]")
	parent := parentPath(generic)
	for _, f := range table {
		if f.path == generic || (strings.HasSuffix(f.path, ".*") && strings.TrimSuffix(f.path, ".*") == parent) {
			return f, true
		}
	}
	return ignoredField{}, false
}

// keptWarning returns the warning entry of a field edgeset decodes, if the
// table has one for it.
func keptWarning(table []ignoredField, src string) (ignoredField, bool) {
	f, ok := matchIgnored(table, src)
	return f, ok && f.keep
}

// keptNames returns the last path segments of the table's kept fields, so
// that the walker only matches the paths that can have one.
func keptNames(table []ignoredField) map[string]bool {
	names := map[string]bool{}
	for _, f := range table {
		if f.keep {
			names[f.path[strings.LastIndex(f.path, ".")+1:]] = true
		}
	}
	return names
}

// volumeSources returns the source keys (every key but name) of the volume
// mapping v, in order.
func volumeSources(v *yaml.Node) []string {
	var keys []string
	for i := 0; i+1 < len(v.Content); i += 2 {
		if key := v.Content[i].Value; key != "name" {
			keys = append(keys, key)
		}
	}
	return keys
}

// unprovidedVolumes returns the volumes of the pod spec mapping n whose only
// source is one a device does not provide, keyed by name, with their kind.
// A volume with an unknown key, or with more than one source, is left to
// the walker to report.
func unprovidedVolumes(n *yaml.Node) map[string]string {
	dropped := map[string]string{}
	vols := mappingValue(n, "volumes")
	if vols == nil || vols.Kind != yaml.SequenceNode {
		return dropped
	}
	for _, v := range vols.Content {
		name, ok := scalarValue(v, "name")
		if !ok {
			continue
		}
		if srcs := volumeSources(v); len(srcs) == 1 {
			if _, unprovided := droppedVolumeKinds[srcs[0]]; unprovided {
				dropped[name] = srcs[0]
			}
		}
	}
	return dropped
}

// checkVolumeSources reports a volume mapping with more than one known
// source, which Kubernetes rejects too.
func (w *walker) checkVolumeSources(n *yaml.Node, p fieldPath) bool {
	var known []string
	for _, key := range volumeSources(n) {
		_, dropped := droppedVolumeKinds[key]
		if dropped || slices.Contains(providedVolumeKinds, key) {
			known = append(known, key)
		}
	}
	if len(known) > 1 {
		w.errorAt(p, n.Line, "must have exactly one volume source, has %d (%s)", len(known), strings.Join(known, ", "))
		return false
	}
	return true
}

// dropsVolume reports whether the Volume or VolumeMount mapping n refers to
// a volume edgeset does not provide, and warns when it does.
func (w *walker) dropsVolume(n *yaml.Node, t reflect.Type, p fieldPath) bool {
	name, _ := scalarValue(n, "name")
	kind, dropped := w.droppedVolumes[name]
	if !dropped {
		return false
	}
	if t == volumeType {
		w.warnAt(p, n.Line, WarningChangesDaemon, "%svolume %q (%s) is not provided: %s; the volume and its mounts are dropped",
			prefixIgnored, name, kind, droppedVolumeKinds[kind])
	} else {
		at, _ := scalarValue(n, "mountPath")
		w.warnAt(p, n.Line, WarningChangesDaemon, "%snothing is mounted at %s: volume %q (%s) is not provided on edge devices",
			prefixIgnored, at, name, kind)
	}
	return true
}

// ignoredMessage renders the warning of a table entry.
func ignoredMessage(f ignoredField) string {
	if f.keep {
		return prefixPartial + f.reason
	}
	return fmt.Sprint(prefixIgnored, f.reason)
}
