package schema

import (
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ignoredField is a Kubernetes field that edgeset accepts and drops with a
// warning because it has no meaning on an edge device. path uses "[*]" for
// any list index; a path ending in ".*" matches every field of that object
// that edgeset's types lack.
type ignoredField struct {
	path   string
	reason string
	// dropItem drops the whole enclosing list item (an env var whose value
	// comes from the Kubernetes API cannot be set at all).
	dropItem bool
}

// Reasons shared by several ignored fields.
const (
	reasonServerSet   = "set by the Kubernetes API server; edgeset ignores it"
	reasonStatus      = "status is observed by edgeset, not declared"
	reasonNoAccount   = "edge devices have no Kubernetes service accounts"
	reasonScheduling  = "edgeset places daemons itself; Kubernetes scheduling settings have no effect"
	reasonPodSecurity = "pod-level securityContext is not applied on edge devices; only containers[].securityContext.privileged is"
	reasonDNS         = "edge devices use the host's DNS configuration"
	reasonNotRun      = "not run on edge devices"
	reasonContainerSC = "only securityContext.privileged is applied on edge devices"
	reasonTermination = "termination messages are not collected on edge devices"
	reasonMount       = "not supported for hostPath mounts on edge devices"
	reasonInteractive = "daemons on edge devices have no interactive terminal"
)

// metadataIgnored are the server-populated ObjectMeta fields.
var metadataIgnored = []string{
	"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
	"ownerReferences", "finalizers", "generateName", "selfLink",
	"deletionTimestamp", "deletionGracePeriodSeconds",
}

// podSpecIgnored are PodSpec fields with no edge meaning, with their reason.
var podSpecIgnored = map[string]string{
	"serviceAccountName":           reasonNoAccount,
	"serviceAccount":               reasonNoAccount,
	"automountServiceAccountToken": reasonNoAccount,
	"initContainers":               "init containers are " + reasonNotRun,
	"ephemeralContainers":          "ephemeral containers are " + reasonNotRun,
	"priorityClassName":            reasonScheduling,
	"priority":                     reasonScheduling,
	"preemptionPolicy":             reasonScheduling,
	"schedulerName":                reasonScheduling,
	"nodeName":                     reasonScheduling,
	"topologySpreadConstraints":    reasonScheduling,
	"schedulingGates":              reasonScheduling,
	"readinessGates":               reasonScheduling,
	"activeDeadlineSeconds":        "daemons run until replaced",
	"dnsPolicy":                    reasonDNS,
	"dnsConfig":                    reasonDNS,
	"hostname":                     reasonDNS,
	"subdomain":                    reasonDNS,
	"setHostnameAsFQDN":            reasonDNS,
	"hostAliases":                  reasonDNS,
	"securityContext":              reasonPodSecurity,
	"imagePullSecrets":             "registry credentials come from the device's Docker configuration",
	"hostIPC":                      "hostIPC is not supported on edge devices",
	"hostUsers":                    "user namespaces are not configured on edge devices",
	"shareProcessNamespace":        "containers of an instance do not share a process namespace on edge devices",
	"enableServiceLinks":           "edge devices have no Kubernetes services",
	"runtimeClassName":             "the device's Docker runtime is used",
	"overhead":                     "pod overhead is not accounted on edge devices",
	"os":                           "the device's operating system is given by its node labels",
	"resourceClaims":               "dynamic resource allocation is not available on edge devices",
	"affinity.podAffinity":         "inter-pod affinity has no meaning on edge devices",
	"affinity.podAntiAffinity":     "inter-pod affinity has no meaning on edge devices",
	"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": "preferred node affinity has no effect: a daemon runs on every matching node",
}

// containerIgnored are Container fields with no edge meaning.
var containerIgnored = map[string]string{
	"startupProbe":                      "startup probes are not run on edge devices",
	"lifecycle":                         "lifecycle hooks are not run on edge devices",
	"workingDir":                        "the image's working directory is used on edge devices",
	"terminationMessagePath":            reasonTermination,
	"terminationMessagePolicy":          reasonTermination,
	"stdin":                             reasonInteractive,
	"stdinOnce":                         reasonInteractive,
	"tty":                               reasonInteractive,
	"envFrom":                           "ConfigMaps and Secrets are not available on edge devices",
	"resizePolicy":                      "in-place resize is not supported on edge devices",
	"restartPolicy":                     "sidecar containers are not supported on edge devices",
	"resources.claims":                  "dynamic resource allocation is not available on edge devices",
	"securityContext.*":                 reasonContainerSC,
	"volumeMounts[*].subPath":           reasonMount,
	"volumeMounts[*].subPathExpr":       reasonMount,
	"volumeMounts[*].mountPropagation":  reasonMount,
	"volumeMounts[*].recursiveReadOnly": reasonMount,
	"livenessProbe.terminationGracePeriodSeconds":  "probe-level grace periods are not supported on edge devices",
	"readinessProbe.terminationGracePeriodSeconds": "probe-level grace periods are not supported on edge devices",
}

// volumeSources are the Kubernetes volume types other than hostPath. A
// volume of one of these kinds is not provided on edge devices.
var volumeSources = []string{
	"emptyDir", "configMap", "secret", "persistentVolumeClaim", "projected",
	"downwardAPI", "nfs", "csi", "ephemeral", "iscsi", "local", "image",
	"gitRepo", "awsElasticBlockStore", "gcePersistentDisk", "azureDisk",
	"azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker",
	"glusterfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd",
	"scaleIO", "storageos", "vsphereVolume",
}

// daemonSetIgnored is the table of Kubernetes DaemonSet fields that Decode
// accepts and drops with a warning.
var daemonSetIgnored = buildDaemonSetIgnored()

func buildDaemonSetIgnored() []ignoredField {
	var t []ignoredField
	for _, f := range metadataIgnored {
		t = append(t,
			ignoredField{path: "metadata." + f, reason: reasonServerSet},
			ignoredField{path: "spec.template.metadata." + f, reason: reasonServerSet})
	}
	t = append(t, ignoredField{path: "status", reason: reasonStatus})
	t = append(t, ignoredField{path: "spec.templateGeneration", reason: reasonServerSet})
	for f, r := range podSpecIgnored {
		t = append(t, ignoredField{path: "spec.template.spec." + f, reason: r})
	}
	for f, r := range containerIgnored {
		t = append(t, ignoredField{path: "spec.template.spec.containers[*]." + f, reason: r})
	}
	t = append(t, ignoredField{
		path:     "spec.template.spec.containers[*].env[*].valueFrom",
		reason:   "values from the Kubernetes API (fieldRef, secretKeyRef, configMapKeyRef, resourceFieldRef) are not available on edge devices; the variable is dropped",
		dropItem: true,
	})
	for _, src := range volumeSources {
		t = append(t, ignoredField{
			path:   "spec.template.spec.volumes[*]." + src,
			reason: src + " volumes are not provided on edge devices",
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

// unprovidedVolumes returns the volumes of the pod spec mapping n that have
// no hostPath, keyed by name, with the kind of volume each one is. A volume
// that names no source at all is an emptyDir, as in Kubernetes. A volume
// whose only other key is not a known volume type is left to the walker to
// report.
func unprovidedVolumes(n *yaml.Node) map[string]string {
	dropped := map[string]string{}
	vols := mappingValue(n, "volumes")
	if vols == nil || vols.Kind != yaml.SequenceNode {
		return dropped
	}
	for _, v := range vols.Content {
		name, ok := scalarValue(v, "name")
		if !ok || mappingValue(v, "hostPath") != nil && mappingValue(v, "hostPath").Tag != "!!null" {
			continue
		}
		if kind, known := volumeKind(v); known {
			dropped[name] = kind
		}
	}
	return dropped
}

// volumeKind returns the source type of a volume without hostPath.
func volumeKind(v *yaml.Node) (kind string, known bool) {
	for i := 0; i+1 < len(v.Content); i += 2 {
		key := v.Content[i].Value
		if key == "name" {
			continue
		}
		for _, src := range volumeSources {
			if key == src {
				return src, true
			}
		}
		return key, false
	}
	return "emptyDir", true
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
		w.warnAt(p, n.Line, "ignored: volume %q (%s) is not provided on edge devices, only hostPath volumes are; the volume and its mounts are dropped", name, kind)
	} else {
		w.warnAt(p, n.Line, "ignored: mounts volume %q, which is not provided on edge devices", name)
	}
	return true
}
