package schema

// API versions and kinds that edgeset accepts.
const (
	// APIVersionApps is the Kubernetes group version; manifests written for
	// Kubernetes apply unchanged and keep their Kubernetes meaning.
	APIVersionApps = "apps/v1"
	// APIVersionEdgeset is edgeset's own group version. It is a superset of
	// apps/v1: the same fields plus edgeset's extensions (spec.rollout).
	APIVersionEdgeset = "edgeset.io/v1"

	KindDaemonSet = "DaemonSet"
	KindNode      = "Node"
	KindList      = "List"
	KindNodeList  = "NodeList"

	// DefaultNamespace is used when a manifest names none, as in Kubernetes.
	DefaultNamespace = "default"
)

// TypeMeta identifies the schema of an object.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// ObjectMeta is the subset of Kubernetes object metadata that edgeset keeps.
type ObjectMeta struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DaemonSet declares a daemon that runs once on every matching node.
type DaemonSet struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     DaemonSetSpec `json:"spec"`
}

// Key returns the daemonset's identity, "namespace/name", with the default
// namespace applied.
func (ds *DaemonSet) Key() string {
	ns := ds.Metadata.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return ns + "/" + ds.Metadata.Name
}

// DaemonSetSpec is the desired behaviour of a daemonset.
type DaemonSetSpec struct {
	Selector             *LabelSelector          `json:"selector,omitempty"`
	Template             PodTemplateSpec         `json:"template"`
	UpdateStrategy       DaemonSetUpdateStrategy `json:"updateStrategy,omitempty"`
	MinReadySeconds      int32                   `json:"minReadySeconds,omitempty"`
	RevisionHistoryLimit *int32                  `json:"revisionHistoryLimit,omitempty"`

	// Rollout holds edgeset's rollout extensions. Only valid with
	// apiVersion edgeset.io/v1, so apps/v1 manifests keep their meaning.
	Rollout *RolloutPolicy `json:"rollout,omitempty"`
}

// RolloutPolicy is edgeset's extension of the update strategy for fleets
// with unreliable links.
type RolloutPolicy struct {
	// OfflineGraceSeconds: nodes offline longer than this do not count
	// against maxUnavailable and are updated when they return.
	OfflineGraceSeconds *int32 `json:"offlineGraceSeconds,omitempty"`
	// ProgressDeadlineSeconds: an instance not available this long after
	// being updated counts as failed.
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	// FailureThreshold (count or percentage of updated instances) pauses
	// the rollout when crossed.
	FailureThreshold *IntOrString `json:"failureThreshold,omitempty"`
	// AutoRollback rolls the previous good revision out when the failure
	// threshold is crossed.
	AutoRollback bool `json:"autoRollback,omitempty"`
	// Paused stops the rollout from starting new batches.
	Paused bool `json:"paused,omitempty"`
	// Canary updates this many nodes (or percentage) first and waits.
	Canary *CanaryPolicy `json:"canary,omitempty"`
}

// CanaryPolicy updates a first group of nodes and waits for promotion.
type CanaryPolicy struct {
	Nodes *IntOrString `json:"nodes,omitempty"`
	// AutoPromoteSeconds promotes automatically after the canary nodes stay
	// available this long; zero waits for `rollout promote`.
	AutoPromoteSeconds int32 `json:"autoPromoteSeconds,omitempty"`
}

// Update strategy types.
const (
	RollingUpdateStrategy = "RollingUpdate"
	OnDeleteStrategy      = "OnDelete"
)

// DaemonSetUpdateStrategy says how instances move to a new revision.
type DaemonSetUpdateStrategy struct {
	Type          string                  `json:"type,omitempty"`
	RollingUpdate *RollingUpdateDaemonSet `json:"rollingUpdate,omitempty"`
}

// RollingUpdateDaemonSet bounds a rolling update.
type RollingUpdateDaemonSet struct {
	MaxUnavailable *IntOrString `json:"maxUnavailable,omitempty"`
	MaxSurge       *IntOrString `json:"maxSurge,omitempty"`
}

// LabelSelector selects objects by label, as in Kubernetes.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// Label selector operators.
const (
	LabelOpIn           = "In"
	LabelOpNotIn        = "NotIn"
	LabelOpExists       = "Exists"
	LabelOpDoesNotExist = "DoesNotExist"
)

// LabelSelectorRequirement is one expression of a LabelSelector.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// PodTemplateSpec describes the instance each node runs.
type PodTemplateSpec struct {
	Metadata ObjectMeta `json:"metadata,omitempty"`
	Spec     PodSpec    `json:"spec"`
}

// Restart policies. A daemon always restarts; the others are rejected.
const RestartPolicyAlways = "Always"

// PodSpec is the part of a Kubernetes PodSpec that has a meaning on an edge
// device. Fields outside it are accepted with a warning (see Decode).
type PodSpec struct {
	NodeSelector                  map[string]string `json:"nodeSelector,omitempty"`
	Affinity                      *Affinity         `json:"affinity,omitempty"`
	Tolerations                   []Toleration      `json:"tolerations,omitempty"`
	HostNetwork                   bool              `json:"hostNetwork,omitempty"`
	HostPID                       bool              `json:"hostPID,omitempty"`
	Containers                    []Container       `json:"containers"`
	Volumes                       []Volume          `json:"volumes,omitempty"`
	TerminationGracePeriodSeconds *int64            `json:"terminationGracePeriodSeconds,omitempty"`
	RestartPolicy                 string            `json:"restartPolicy,omitempty"`
}

// Affinity holds scheduling constraints. Only required node affinity has an
// edge meaning.
type Affinity struct {
	NodeAffinity *NodeAffinity `json:"nodeAffinity,omitempty"`
}

// NodeAffinity constrains the nodes a daemon runs on.
type NodeAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution *NodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector is a disjunction of terms.
type NodeSelector struct {
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// NodeSelectorTerm is a conjunction of requirements.
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
	MatchFields      []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// Node selector operators.
const (
	NodeOpIn           = "In"
	NodeOpNotIn        = "NotIn"
	NodeOpExists       = "Exists"
	NodeOpDoesNotExist = "DoesNotExist"
	NodeOpGt           = "Gt"
	NodeOpLt           = "Lt"
)

// NodeSelectorRequirement is one expression over a node label or field.
type NodeSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Toleration operators.
const (
	TolerationOpEqual  = "Equal"
	TolerationOpExists = "Exists"
)

// Toleration lets a daemon run on a node with a matching taint.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// Image pull policies.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// Container is one process of a daemon instance.
type Container struct {
	Name            string               `json:"name"`
	Image           string               `json:"image"`
	ImagePullPolicy string               `json:"imagePullPolicy,omitempty"`
	Command         []string             `json:"command,omitempty"`
	Args            []string             `json:"args,omitempty"`
	Env             []EnvVar             `json:"env,omitempty"`
	Ports           []ContainerPort      `json:"ports,omitempty"`
	Resources       ResourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []VolumeMount        `json:"volumeMounts,omitempty"`
	SecurityContext *SecurityContext     `json:"securityContext,omitempty"`
	ReadinessProbe  *Probe               `json:"readinessProbe,omitempty"`
	LivenessProbe   *Probe               `json:"livenessProbe,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// ContainerPort exposes a port; HostPort binds it on the device.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	HostPort      int32  `json:"hostPort,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
}

// ResourceList maps a resource name (cpu, memory) to a quantity such as
// "100m" or "200Mi".
type ResourceList map[string]Quantity

// ResourceRequirements are a container's requests and limits.
type ResourceRequirements struct {
	Requests ResourceList `json:"requests,omitempty"`
	Limits   ResourceList `json:"limits,omitempty"`
}

// VolumeMount mounts a declared volume into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// SecurityContext holds the security settings edgeset honours.
type SecurityContext struct {
	Privileged *bool `json:"privileged,omitempty"`
}

// Probe checks a container's health.
type Probe struct {
	Exec                *ExecAction      `json:"exec,omitempty"`
	HTTPGet             *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket           *TCPSocketAction `json:"tcpSocket,omitempty"`
	InitialDelaySeconds int32            `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      int32            `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       int32            `json:"periodSeconds,omitempty"`
	SuccessThreshold    int32            `json:"successThreshold,omitempty"`
	FailureThreshold    int32            `json:"failureThreshold,omitempty"`
}

// ExecAction runs a command inside the container.
type ExecAction struct {
	Command []string `json:"command,omitempty"`
}

// HTTPGetAction probes an HTTP endpoint.
type HTTPGetAction struct {
	Path        string       `json:"path,omitempty"`
	Port        IntOrString  `json:"port"`
	Host        string       `json:"host,omitempty"`
	Scheme      string       `json:"scheme,omitempty"`
	HTTPHeaders []HTTPHeader `json:"httpHeaders,omitempty"`
}

// HTTPHeader is one header of an HTTP probe.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TCPSocketAction probes a TCP port.
type TCPSocketAction struct {
	Port IntOrString `json:"port"`
	Host string      `json:"host,omitempty"`
}

// Volume is a volume an instance may mount. Only hostPath has an edge
// meaning.
type Volume struct {
	Name     string                `json:"name"`
	HostPath *HostPathVolumeSource `json:"hostPath,omitempty"`
}

// HostPathVolumeSource mounts a path of the device.
type HostPathVolumeSource struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}
