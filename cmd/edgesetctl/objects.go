package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// The manifest shapes of -o json|yaml|jsonpath|custom-columns: what the
// API returns, laid out as Kubernetes prints objects (apiVersion, kind,
// metadata, spec, status), so that an exported DaemonSet, ConfigMap or
// Secret applies again and exported Nodes are a node file for explain.
// What edgeset adds to Kubernetes' shape lives under status, which apply
// ignores; server-set metadata (generation, resourceVersion,
// creationTimestamp) is ignored by apply too.

// apiVersionEdgeset is the group version of edgeset's own read-only kinds.
const apiVersionEdgeset = schema.APIVersionEdgeset

// objectList is Kubernetes' v1 List, as kubectl prints several objects.
type objectList struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   listMeta `json:"metadata"`
	Items      []any    `json:"items"`
}

type listMeta struct {
	ResourceVersion string `json:"resourceVersion"`
}

// objectMeta is the metadata of a printed object.
type objectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// manifestObjects turns what fetchObjects returned for kind into manifest
// shapes, in order.
func manifestObjects(kind string, v any) []any {
	var out []any
	switch kind {
	case kindNode:
		for _, n := range v.([]api.Node) {
			out = append(out, nodeManifest(n))
		}
	case kindDaemonSet:
		for _, d := range v.([]api.DaemonSet) {
			out = append(out, daemonSetManifest(d))
		}
	case kindConfigMap:
		for _, cm := range v.([]api.ConfigMap) {
			out = append(out, configMapManifest(cm))
		}
	case kindSecret:
		for _, s := range v.([]api.Secret) {
			out = append(out, secretManifest(s))
		}
	case kindSource:
		for _, s := range v.([]api.Source) {
			out = append(out, sourceManifest(s))
		}
	default:
		for _, in := range v.([]api.Instance) {
			out = append(out, instanceManifest(in))
		}
	}
	return out
}

// listOf wraps items in a v1 List.
func listOf(items []any) objectList {
	if items == nil {
		items = []any{}
	}
	return objectList{APIVersion: schema.APIVersionCore, Kind: schema.KindList, Items: items}
}

// daemonSetObject is a DaemonSet as kubectl prints it.
type daemonSetObject struct {
	schema.TypeMeta `json:",inline"`
	Metadata        objectMeta           `json:"metadata"`
	Spec            schema.DaemonSetSpec `json:"spec"`
	Status          daemonSetStatus      `json:"status"`
}

// daemonSetStatus is Kubernetes' DaemonSet status (observedGeneration,
// desiredNumberScheduled, ...) plus edgeset's revision, rollout, source
// and instances.
type daemonSetStatus struct {
	api.DaemonSetStatus
	CurrentRevision int64          `json:"currentRevision"`
	CurrentHash     string         `json:"currentHash,omitempty"`
	Source          string         `json:"source,omitempty"`
	UpdatedAt       *time.Time     `json:"updatedAt,omitempty"`
	Instances       []api.Instance `json:"instances,omitempty"`
}

func daemonSetManifest(d api.DaemonSet) daemonSetObject {
	m := d.Manifest
	tm := m.TypeMeta
	if tm.APIVersion == "" {
		tm.APIVersion = schema.APIVersionApps
	}
	tm.Kind = schema.KindDaemonSet
	return daemonSetObject{
		TypeMeta: tm,
		Metadata: objectMeta{
			Name: d.Name, Namespace: d.Namespace, Labels: m.Metadata.Labels, Annotations: m.Metadata.Annotations,
			Generation: d.Generation, CreationTimestamp: timePtr(d.CreatedAt),
		},
		Spec: m.Spec,
		Status: daemonSetStatus{
			DaemonSetStatus: d.Status, CurrentRevision: d.CurrentRevision, CurrentHash: d.CurrentHash,
			Source: d.Source, UpdatedAt: timePtr(d.UpdatedAt), Instances: d.Instances,
		},
	}
}

// nodeObject is a node as a Kubernetes v1 Node, in the fields that
// schema.DecodeNodes reads back, plus edgeset's presence under status.
type nodeObject struct {
	schema.TypeMeta `json:",inline"`
	Metadata        objectMeta       `json:"metadata"`
	Spec            nodeObjectSpec   `json:"spec"`
	Status          nodeObjectStatus `json:"status"`
}

type nodeObjectSpec struct {
	Taints        []schema.Taint `json:"taints,omitempty"`
	Unschedulable bool           `json:"unschedulable,omitempty"`
}

type nodeObjectStatus struct {
	Conditions         []nodeCondition      `json:"conditions,omitempty"`
	Addresses          []schema.NodeAddress `json:"addresses,omitempty"`
	Capacity           schema.ResourceList  `json:"capacity,omitempty"`
	NodeInfo           nodeInfo             `json:"nodeInfo"`
	Online             bool                 `json:"online"`
	LastSeen           *time.Time           `json:"lastSeen,omitempty"`
	OfflineSince       *time.Time           `json:"offlineSince,omitempty"`
	DesiredGeneration  uint64               `json:"desiredGeneration"`
	ObservedGeneration uint64               `json:"observedGeneration"`
	Instances          []api.Instance       `json:"instances,omitempty"`
	Placement          []api.Placement      `json:"placement,omitempty"`
}

type nodeCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
}

// nodeInfo is Kubernetes' NodeSystemInfo in the fields edgeset knows, and
// the agent's version.
type nodeInfo struct {
	OperatingSystem         string `json:"operatingSystem,omitempty"`
	Architecture            string `json:"architecture,omitempty"`
	KernelVersion           string `json:"kernelVersion,omitempty"`
	ContainerRuntimeVersion string `json:"containerRuntimeVersion,omitempty"`
	AgentVersion            string `json:"agentVersion,omitempty"`
}

func nodeManifest(n api.Node) nodeObject {
	o := nodeObject{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionKubernetesCore, Kind: schema.KindNode},
		Metadata: objectMeta{Name: n.Name, Labels: n.Labels},
		Spec:     nodeObjectSpec{Taints: n.Taints, Unschedulable: n.Unschedulable},
		Status: nodeObjectStatus{
			Addresses: n.Addresses, Capacity: n.Capacity,
			NodeInfo: nodeInfo{
				OperatingSystem: n.Info.OS, Architecture: n.Info.Arch, KernelVersion: n.Info.KernelVersion,
				ContainerRuntimeVersion: runtimeVersion(n.Info), AgentVersion: n.Info.AgentVersion,
			},
			Online: n.Online, LastSeen: n.LastSeen, OfflineSince: n.OfflineSince,
			DesiredGeneration: n.DesiredGeneration, ObservedGeneration: n.ObservedGeneration,
			Instances: n.Instances, Placement: n.Placement,
		},
	}
	if n.Info.Hostname != "" && n.Labels[schema.LabelHostname] == "" && !hasAddress(n.Addresses, "Hostname") {
		o.Status.Addresses = append(append([]schema.NodeAddress{}, n.Addresses...), schema.NodeAddress{Type: "Hostname", Address: n.Info.Hostname})
	}
	for _, c := range n.Conditions {
		o.Status.Conditions = append(o.Status.Conditions, nodeCondition{
			Type: c.Type, Status: c.Status, LastTransitionTime: timePtr(c.Since), Reason: c.Reason, Message: c.Message,
		})
	}
	return o
}

// runtimeVersion renders the runtime as Kubernetes' containerRuntimeVersion:
// "docker://27.3.1".
func runtimeVersion(i schema.NodeInfo) string {
	switch {
	case i.Runtime != "" && i.RuntimeVersion != "":
		return i.Runtime + "://" + i.RuntimeVersion
	case i.Runtime != "":
		return i.Runtime + "://"
	}
	return i.RuntimeVersion
}

func hasAddress(addrs []schema.NodeAddress, typ string) bool {
	for _, a := range addrs {
		if a.Type == typ {
			return true
		}
	}
	return false
}

// configStatus is what edgeset reports about a ConfigMap or Secret: its
// content address, who uses it and where it is delivered, its keys and
// sizes. Kubernetes' config objects have no status; apply ignores this one.
type configStatus struct {
	Hash         string          `json:"hash,omitempty"`
	Source       string          `json:"source,omitempty"`
	UpdatedAt    *time.Time      `json:"updatedAt,omitempty"`
	Keys         []api.ConfigKey `json:"keys"`
	ReferencedBy []string        `json:"referencedBy,omitempty"`
	Nodes        int             `json:"nodes"`
}

func configMeta(m api.ConfigMeta) (objectMeta, configStatus) {
	meta := objectMeta{
		Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations,
		Generation: m.Generation, CreationTimestamp: timePtr(m.CreatedAt),
	}
	if m.ResourceVersion != 0 {
		meta.ResourceVersion = fmt.Sprint(m.ResourceVersion)
	}
	keys := m.Keys
	if keys == nil {
		keys = []api.ConfigKey{}
	}
	return meta, configStatus{
		Hash: m.Hash, Source: m.Source, UpdatedAt: timePtr(m.UpdatedAt), Keys: keys,
		ReferencedBy: m.ReferencedBy, Nodes: m.Nodes,
	}
}

// configMapObject is a v1 ConfigMap.
type configMapObject struct {
	schema.TypeMeta `json:",inline"`
	Metadata        objectMeta        `json:"metadata"`
	Data            map[string]string `json:"data,omitempty"`
	BinaryData      map[string][]byte `json:"binaryData,omitempty"`
	Immutable       *bool             `json:"immutable,omitempty"`
	Status          configStatus      `json:"status"`
}

func configMapManifest(cm api.ConfigMap) configMapObject {
	meta, st := configMeta(cm.ConfigMeta)
	return configMapObject{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindConfigMap},
		Metadata: meta, Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable, Status: st,
	}
}

// secretObject is a v1 Secret. Without --show-values it has no data, and
// apply refuses it (see schema's Secret decoding) rather than empty the
// live Secret.
type secretObject struct {
	schema.TypeMeta `json:",inline"`
	Metadata        objectMeta        `json:"metadata"`
	Type            string            `json:"type,omitempty"`
	Data            map[string][]byte `json:"data,omitempty"`
	Immutable       *bool             `json:"immutable,omitempty"`
	Status          configStatus      `json:"status"`
}

func secretManifest(s api.Secret) secretObject {
	meta, st := configMeta(s.ConfigMeta)
	return secretObject{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindSecret},
		Metadata: meta, Type: s.Type, Data: s.Data, Immutable: s.Immutable, Status: st,
	}
}

// instanceObject is edgeset's read-only Instance: one daemon on one node.
type instanceObject struct {
	schema.TypeMeta `json:",inline"`
	Metadata        objectMeta     `json:"metadata"`
	Spec            instanceSpec   `json:"spec"`
	Status          instanceStatus `json:"status"`
}

type instanceSpec struct {
	DaemonSet string `json:"daemonSet"`
	Node      string `json:"node"`
	Revision  string `json:"revision"`
}

type instanceStatus struct {
	Phase    string     `json:"phase"`
	Ready    bool       `json:"ready"`
	Restarts int32      `json:"restarts"`
	Message  string     `json:"message,omitempty"`
	Online   bool       `json:"online"`
	LastSeen *time.Time `json:"lastSeen,omitempty"`
}

// instanceManifest names an instance DAEMONSET@NODE in the daemonset's
// namespace.
func instanceManifest(in api.Instance) instanceObject {
	ns, name, _ := strings.Cut(in.DaemonSet, "/")
	return instanceObject{
		TypeMeta: schema.TypeMeta{APIVersion: apiVersionEdgeset, Kind: "Instance"},
		Metadata: objectMeta{Name: name + "@" + in.Node, Namespace: ns},
		Spec:     instanceSpec{DaemonSet: in.DaemonSet, Node: in.Node, Revision: in.Revision},
		Status: instanceStatus{Phase: in.Phase, Ready: in.Ready, Restarts: in.Restarts, Message: in.Message,
			Online: in.Online, LastSeen: in.LastSeen},
	}
}

// sourceObject is edgeset's read-only Source: one watched manifest file.
type sourceObject struct {
	schema.TypeMeta `json:",inline"`
	Metadata        objectMeta   `json:"metadata"`
	Status          sourceStatus `json:"status"`
}

type sourceStatus struct {
	Phase       string     `json:"phase"`
	DaemonSets  []string   `json:"daemonSets,omitempty"`
	ConfigMaps  []string   `json:"configMaps,omitempty"`
	Secrets     []string   `json:"secrets,omitempty"`
	LastApplied *time.Time `json:"lastApplied,omitempty"`
	Errors      []string   `json:"errors,omitempty"`
}

func sourceManifest(s api.Source) sourceObject {
	return sourceObject{
		TypeMeta: schema.TypeMeta{APIVersion: apiVersionEdgeset, Kind: "Source"},
		Metadata: objectMeta{Name: s.Path},
		Status: sourceStatus{Phase: s.Status, DaemonSets: s.DaemonSets, ConfigMaps: s.ConfigMaps, Secrets: s.Secrets,
			LastApplied: s.LastApplied, Errors: s.Errors},
	}
}
