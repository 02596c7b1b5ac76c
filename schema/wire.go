package schema

import "time"

// WireVersion is the schema version of every message on the v1 topics. A
// receiver rejects messages of another version.
const WireVersion = 1

// NodeStatus is what an agent announces on its status topic: retained, sent
// on change only. Liveness is not carried here (see Presence).
type NodeStatus struct {
	SchemaVersion int               `json:"schemaVersion"`
	Node          string            `json:"node"`
	Labels        map[string]string `json:"labels,omitempty"`
	Taints        []Taint           `json:"taints,omitempty"`
	Conditions    []NodeCondition   `json:"conditions,omitempty"`
	Addresses     []NodeAddress     `json:"addresses,omitempty"`
	Capacity      ResourceList      `json:"capacity,omitempty"`
	Info          NodeInfo          `json:"info,omitempty"`
}

// Presence is carried by the online topic: retained, published online by the
// agent after it connects and offline by the broker as the agent's will.
// Session identifies the connection (the agent's connect time in Unix
// nanoseconds) so a late will of an older session cannot override a newer
// online message.
type Presence struct {
	SchemaVersion int    `json:"schemaVersion"`
	Node          string `json:"node"`
	Online        bool   `json:"online"`
	Session       int64  `json:"session"`
}

// DesiredState is a node's whole desired state, published retained by the
// controller. Templates are not inlined: each instance references a
// content-addressed Revision published on its own retained topic, so a
// change to one daemonset resends only that daemonset's template.
type DesiredState struct {
	SchemaVersion int               `json:"schemaVersion"`
	Node          string            `json:"node"`
	Generation    uint64            `json:"generation"`
	Instances     []DesiredInstance `json:"instances"`
	// ConfigMaps and Secrets are the config objects the instances
	// reference that exist, each by its content hash, sorted by namespace
	// and name. A referenced object that is absent does not exist (the
	// instance waits in CreateContainerConfigError unless the reference is
	// optional). ConfigMaps travel on ConfigMapTopic(hash), Secrets on the
	// node's own NodeSecretTopic(node, hash).
	ConfigMaps []ObjectRef `json:"configMaps,omitempty"`
	Secrets    []ObjectRef `json:"secrets,omitempty"`
	// Prefetch lists the revisions whose images the node is to download
	// in the background, at most one per daemonset, sorted by daemonset:
	// the revisions it will switch to (spec.rollout.prefetch). Sent only
	// to agents that announce LabelPrefetch.
	Prefetch []DesiredInstance `json:"prefetch,omitempty"`
}

// ObjectRef names one version of a namespaced config object.
type ObjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Hash      string `json:"hash"`
}

// ConfigMapMessage is one ConfigMap version, published retained on
// ConfigMapTopic(Hash); every node may read it. Agents verify the hash.
type ConfigMapMessage struct {
	SchemaVersion int       `json:"schemaVersion"`
	Hash          string    `json:"hash"`
	ConfigMap     ConfigMap `json:"configMap"`
}

// SecretMessage is one Secret version for one node, published retained on
// NodeSecretTopic(Node, Hash), which only that node may read. Agents
// verify the node and the hash.
type SecretMessage struct {
	SchemaVersion int    `json:"schemaVersion"`
	Node          string `json:"node"`
	Hash          string `json:"hash"`
	Secret        Secret `json:"secret"`
}

// DesiredInstance asks a node to run one revision of a daemonset. A node runs
// two instances of one daemonset only during a surge, when both appear.
type DesiredInstance struct {
	// DaemonSet is "namespace/name".
	DaemonSet string `json:"daemonSet"`
	// Revision is the content hash of the template (see Revision.Hash).
	Revision string `json:"revision"`
	// OverrideUpdateLock, when set (an RFC 3339 instant, FormatLockInstant),
	// lets the agent replace the daemonset's other instances on the node
	// even though their update lock is held, if it was taken at or before
	// this instant: an operator overrode a stale lock (`edgesetctl rollout
	// resume --force`). A lock taken later is respected.
	OverrideUpdateLock string `json:"overrideUpdateLock,omitempty"`
}

// Revision is one immutable template of a daemonset, published retained on
// edgeset/v1/revisions/{hash}. Agents verify the hash before use.
type Revision struct {
	SchemaVersion int             `json:"schemaVersion"`
	Hash          string          `json:"hash"`
	DaemonSet     string          `json:"daemonSet"`
	Number        int64           `json:"number"`
	Template      PodTemplateSpec `json:"template"`
}

// Instance phases, as reported by agents.
const (
	PhasePending          = "Pending"
	PhasePulling          = "Pulling"
	PhaseRunning          = "Running"
	PhaseCrashLoopBackOff = "CrashLoopBackOff"
	PhaseImagePullBackOff = "ImagePullBackOff"
	PhaseErrImagePull     = "ErrImagePull"
	PhaseFailed           = "Failed"
	PhaseRefused          = "Refused"
	PhaseTerminating      = "Terminating"
	// PhaseCreateContainerConfigError: a referenced ConfigMap, Secret or
	// key is missing; the instance waits until it appears.
	PhaseCreateContainerConfigError = "CreateContainerConfigError"
	// PhaseInitError and PhaseInitCrashLoopBackOff: an init container
	// failed (once, or repeatedly under back-off).
	PhaseInitError            = "Init:Error"
	PhaseInitCrashLoopBackOff = "Init:CrashLoopBackOff"
	// PhaseInitializing: init containers are running (Kubernetes shows
	// Init:N/M).
	PhaseInitializing = "Initializing"
)

// ObservedState is what an agent runs, published retained after every change.
type ObservedState struct {
	SchemaVersion      int              `json:"schemaVersion"`
	Node               string           `json:"node"`
	ObservedGeneration uint64           `json:"observedGeneration"`
	Instances          []InstanceStatus `json:"instances"`
	// Prefetch reports the progress of each prefetch the desired state
	// asks for, sorted by daemonset; omitted when it asks for none.
	Prefetch []PrefetchStatus `json:"prefetch,omitempty"`
}

// InstanceStatus is the observed state of one daemon instance on a node.
type InstanceStatus struct {
	DaemonSet    string     `json:"daemonSet"`
	Revision     string     `json:"revision"`
	Phase        string     `json:"phase"`
	Ready        bool       `json:"ready"`
	ReadySince   *time.Time `json:"readySince,omitempty"`
	Restarts     int32      `json:"restarts"`
	LastExitCode *int32     `json:"lastExitCode,omitempty"`
	Message      string     `json:"message,omitempty"`
	ContainerIDs []string   `json:"containerIDs,omitempty"`
	// UpdateLock is the instance's update lock, present while it is held
	// (or while an update it deferred awaits the controller's answer);
	// only instances whose template opts in (UpdateLockAnnotation) have
	// one.
	UpdateLock *UpdateLockStatus `json:"updateLock,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// NodeEvent is a notable occurrence on a node (pull error, crash, probe
// failure), published without retain.
type NodeEvent struct {
	SchemaVersion int       `json:"schemaVersion"`
	Node          string    `json:"node"`
	Time          time.Time `json:"time"`
	Type          string    `json:"type"`
	Reason        string    `json:"reason"`
	DaemonSet     string    `json:"daemonSet,omitempty"`
	Message       string    `json:"message,omitempty"`
}
