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
	// RollOnConfigChange makes a change to a ConfigMap or Secret the
	// template references a new revision, rolled out by the daemonset's own
	// strategy (budget, canary, rollback). Without it, as in Kubernetes,
	// mounted files are updated in place and environment values keep what
	// they had when the container started.
	RollOnConfigChange bool `json:"rollOnConfigChange,omitempty"`
	// MaxUnavailablePerTopology bounds, on top of maxUnavailable, how many
	// nodes of each topology domain (a site) are updated at once.
	MaxUnavailablePerTopology *TopologyBudget `json:"maxUnavailablePerTopology,omitempty"`
	// MaintenanceWindows, when set, confine switches to a new revision to
	// the windows that select each node (rollout_schedule.go).
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`
	// Prefetch downloads a new revision's images on every node before
	// the rollout switches it (rollout_prefetch.go).
	Prefetch *PrefetchPolicy `json:"prefetch,omitempty"`
	// UpdateLockStaleAfterSeconds: an update lock (UpdateLockAnnotation)
	// held longer than this is reported stale, and `edgesetctl rollout
	// resume --force` may override it. Zero: never stale. Unset:
	// DefaultUpdateLockStaleAfter.
	UpdateLockStaleAfterSeconds *int32 `json:"updateLockStaleAfterSeconds,omitempty"`
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
	InitContainers                []Container       `json:"initContainers,omitempty"`
	Containers                    []Container       `json:"containers"`
	Volumes                       []Volume          `json:"volumes,omitempty"`
	TerminationGracePeriodSeconds *int64            `json:"terminationGracePeriodSeconds,omitempty"`
	RestartPolicy                 string            `json:"restartPolicy,omitempty"`
	// SecurityContext holds pod-level security settings; a container's own
	// securityContext overrides the fields both have.
	SecurityContext *PodSecurityContext `json:"securityContext,omitempty"`
	// ImagePullSecrets name kubernetes.io/dockerconfigjson Secrets in the
	// daemonset's namespace whose credentials are used for its pulls, on top
	// of the device's own.
	ImagePullSecrets []LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// ServiceAccountName grants nothing on a device (there is no Kubernetes
	// API); it is kept so that fieldRef spec.serviceAccountName reads it.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ImageSource (edgeset.io/v1 only) says where the devices get the
	// containers' images: ImageSourceRegistry (the default) pulls from the
	// registry and falls back to the controller's image store when the
	// pull fails; ImageSourceController never asks a registry.
	ImageSource string `json:"imageSource,omitempty"`
}

// Image sources (PodSpec.ImageSource).
const (
	ImageSourceRegistry   = "registry"
	ImageSourceController = "controller"
)

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
	StartupProbe    *Probe               `json:"startupProbe,omitempty"`
	Lifecycle       *Lifecycle           `json:"lifecycle,omitempty"`
	WorkingDir      string               `json:"workingDir,omitempty"`
	EnvFrom         []EnvFromSource      `json:"envFrom,omitempty"`
	// TerminationMessagePath is the file whose content (at most 4 KiB)
	// becomes the message of a terminated container;
	// TerminationMessagePolicy FallbackToLogsOnError uses the last log
	// lines when the file is empty and the container failed.
	TerminationMessagePath   string `json:"terminationMessagePath,omitempty"`
	TerminationMessagePolicy string `json:"terminationMessagePolicy,omitempty"`
	// RestartPolicy is only valid on init containers: Always makes one a
	// sidecar that starts before the containers and runs beside them.
	RestartPolicy *string `json:"restartPolicy,omitempty"`
}

// Termination message policies.
const (
	TerminationMessageReadFile              = "File"
	TerminationMessageFallbackToLogsOnError = "FallbackToLogsOnError"
	// DefaultTerminationMessagePath is Kubernetes' default.
	DefaultTerminationMessagePath = "/dev/termination-log"
)

// EnvVar is one environment variable: a literal Value (in which $(VAR)
// references to earlier variables are expanded) or a ValueFrom source.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where an environment variable's value comes from;
// exactly one field is set.
type EnvVarSource struct {
	FieldRef         *ObjectFieldSelector   `json:"fieldRef,omitempty"`
	ResourceFieldRef *ResourceFieldSelector `json:"resourceFieldRef,omitempty"`
	ConfigMapKeyRef  *ConfigMapKeySelector  `json:"configMapKeyRef,omitempty"`
	SecretKeyRef     *SecretKeySelector     `json:"secretKeyRef,omitempty"`
}

// ObjectFieldSelector selects a field of the instance (the downward API):
// metadata.name, metadata.namespace, metadata.uid, metadata.labels['k'],
// metadata.annotations['k'], spec.nodeName, spec.serviceAccountName,
// status.hostIP, status.hostIPs, status.podIP, status.podIPs; under
// edgeset.io/v1 also node.labels['k'].
type ObjectFieldSelector struct {
	APIVersion string `json:"apiVersion,omitempty"`
	FieldPath  string `json:"fieldPath"`
}

// ResourceFieldSelector selects a container's resource limit or request
// (limits.cpu, limits.memory, limits.ephemeral-storage, requests.*),
// scaled by Divisor (default 1).
type ResourceFieldSelector struct {
	ContainerName string    `json:"containerName,omitempty"`
	Resource      string    `json:"resource"`
	Divisor       *Quantity `json:"divisor,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// ConfigMapKeySelector selects one key of a ConfigMap.
type ConfigMapKeySelector struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// SecretKeySelector selects one key of a Secret.
type SecretKeySelector struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// EnvFromSource sets one variable per key of a ConfigMap or Secret, each
// name prefixed with Prefix; keys that are not valid variable names are
// skipped (Kubernetes records an event for them).
type EnvFromSource struct {
	Prefix       string              `json:"prefix,omitempty"`
	ConfigMapRef *ConfigMapEnvSource `json:"configMapRef,omitempty"`
	SecretRef    *SecretEnvSource    `json:"secretRef,omitempty"`
}

// ConfigMapEnvSource names a ConfigMap for envFrom.
type ConfigMapEnvSource struct {
	Name     string `json:"name"`
	Optional *bool  `json:"optional,omitempty"`
}

// SecretEnvSource names a Secret for envFrom.
type SecretEnvSource struct {
	Name     string `json:"name"`
	Optional *bool  `json:"optional,omitempty"`
}

// Lifecycle holds the hooks run after a container starts and before it is
// stopped.
type Lifecycle struct {
	PostStart *LifecycleHandler `json:"postStart,omitempty"`
	PreStop   *LifecycleHandler `json:"preStop,omitempty"`
}

// LifecycleHandler is one hook; exactly one field is set.
type LifecycleHandler struct {
	Exec      *ExecAction      `json:"exec,omitempty"`
	HTTPGet   *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket *TCPSocketAction `json:"tcpSocket,omitempty"`
	Sleep     *SleepAction     `json:"sleep,omitempty"`
}

// SleepAction pauses for Seconds.
type SleepAction struct {
	Seconds int64 `json:"seconds"`
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
	// SubPath mounts one path inside the volume instead of its root. A
	// configMap or secret file mounted by subPath is not updated when the
	// object changes, as in Kubernetes.
	SubPath string `json:"subPath,omitempty"`
	// SubPathExpr is SubPath with $(VAR) references to the container's
	// environment expanded.
	SubPathExpr string `json:"subPathExpr,omitempty"`
	// MountPropagation is None (default), HostToContainer or Bidirectional.
	MountPropagation *string `json:"mountPropagation,omitempty"`
}

// Mount propagation modes.
const (
	MountPropagationNone            = "None"
	MountPropagationHostToContainer = "HostToContainer"
	MountPropagationBidirectional   = "Bidirectional"
)

// SecurityContext holds a container's security settings. Fields left nil
// take the pod's securityContext value, then the engine's default.
type SecurityContext struct {
	Privileged               *bool           `json:"privileged,omitempty"`
	Capabilities             *Capabilities   `json:"capabilities,omitempty"`
	RunAsUser                *int64          `json:"runAsUser,omitempty"`
	RunAsGroup               *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot             *bool           `json:"runAsNonRoot,omitempty"`
	ReadOnlyRootFilesystem   *bool           `json:"readOnlyRootFilesystem,omitempty"`
	AllowPrivilegeEscalation *bool           `json:"allowPrivilegeEscalation,omitempty"`
	SeccompProfile           *SeccompProfile `json:"seccompProfile,omitempty"`
	ProcMount                *string         `json:"procMount,omitempty"`
}

// PodSecurityContext holds security settings for every container of an
// instance.
type PodSecurityContext struct {
	RunAsUser           *int64          `json:"runAsUser,omitempty"`
	RunAsGroup          *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot        *bool           `json:"runAsNonRoot,omitempty"`
	FSGroup             *int64          `json:"fsGroup,omitempty"`
	FSGroupChangePolicy *string         `json:"fsGroupChangePolicy,omitempty"`
	SupplementalGroups  []int64         `json:"supplementalGroups,omitempty"`
	Sysctls             []Sysctl        `json:"sysctls,omitempty"`
	SeccompProfile      *SeccompProfile `json:"seccompProfile,omitempty"`
}

// Capabilities adds and drops Linux capabilities, named without the CAP_
// prefix (NET_ADMIN) or ALL.
type Capabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

// Seccomp profile types.
const (
	SeccompRuntimeDefault = "RuntimeDefault"
	SeccompUnconfined     = "Unconfined"
	SeccompLocalhost      = "Localhost"
)

// SeccompProfile selects a seccomp profile; LocalhostProfile is a path
// relative to the device's seccomp profile directory.
type SeccompProfile struct {
	Type             string  `json:"type"`
	LocalhostProfile *string `json:"localhostProfile,omitempty"`
}

// Proc mount types.
const (
	ProcMountDefault  = "Default"
	ProcMountUnmasked = "Unmasked"
)

// Sysctl is one namespaced kernel parameter set for the instance.
type Sysctl struct {
	Name  string `json:"name"`
	Value string `json:"value"`
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

// Volume is a volume an instance may mount. At most one source is set; a
// volume with none is an emptyDir, as in Kubernetes.
type Volume struct {
	Name        string                   `json:"name"`
	HostPath    *HostPathVolumeSource    `json:"hostPath,omitempty"`
	EmptyDir    *EmptyDirVolumeSource    `json:"emptyDir,omitempty"`
	ConfigMap   *ConfigMapVolumeSource   `json:"configMap,omitempty"`
	Secret      *SecretVolumeSource      `json:"secret,omitempty"`
	Projected   *ProjectedVolumeSource   `json:"projected,omitempty"`
	DownwardAPI *DownwardAPIVolumeSource `json:"downwardAPI,omitempty"`
}

// HostPath volume types, as in Kubernetes. The empty type checks nothing.
const (
	HostPathUnset             = ""
	HostPathDirectoryOrCreate = "DirectoryOrCreate"
	HostPathDirectory         = "Directory"
	HostPathFileOrCreate      = "FileOrCreate"
	HostPathFile              = "File"
	HostPathSocket            = "Socket"
	HostPathCharDevice        = "CharDevice"
	HostPathBlockDevice       = "BlockDevice"
)

// HostPathVolumeSource mounts a path of the device.
type HostPathVolumeSource struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

// Storage media of an emptyDir.
const (
	StorageMediumDefault = ""
	StorageMediumMemory  = "Memory"
)

// EmptyDirVolumeSource is a directory that lives as long as the instance:
// on the device's disk, or a tmpfs with medium Memory.
type EmptyDirVolumeSource struct {
	Medium    string    `json:"medium,omitempty"`
	SizeLimit *Quantity `json:"sizeLimit,omitempty"`
}

// KeyToPath projects one key of a ConfigMap or Secret to a relative file
// path, with an optional file mode.
type KeyToPath struct {
	Key  string `json:"key"`
	Path string `json:"path"`
	Mode *int32 `json:"mode,omitempty"`
}

// DefaultVolumeMode is Kubernetes' default file mode of configMap, secret,
// projected and downwardAPI volumes (0644).
const DefaultVolumeMode int32 = 0o644

// ConfigMapVolumeSource mounts a ConfigMap's keys as files.
type ConfigMapVolumeSource struct {
	Name        string      `json:"name"`
	Items       []KeyToPath `json:"items,omitempty"`
	DefaultMode *int32      `json:"defaultMode,omitempty"`
	Optional    *bool       `json:"optional,omitempty"`
}

// SecretVolumeSource mounts a Secret's keys as files.
type SecretVolumeSource struct {
	SecretName  string      `json:"secretName"`
	Items       []KeyToPath `json:"items,omitempty"`
	DefaultMode *int32      `json:"defaultMode,omitempty"`
	Optional    *bool       `json:"optional,omitempty"`
}

// DownwardAPIVolumeFile is one file of a downwardAPI volume; exactly one
// of FieldRef and ResourceFieldRef is set.
type DownwardAPIVolumeFile struct {
	Path             string                 `json:"path"`
	FieldRef         *ObjectFieldSelector   `json:"fieldRef,omitempty"`
	ResourceFieldRef *ResourceFieldSelector `json:"resourceFieldRef,omitempty"`
	Mode             *int32                 `json:"mode,omitempty"`
}

// DownwardAPIVolumeSource mounts fields of the instance as files.
type DownwardAPIVolumeSource struct {
	Items       []DownwardAPIVolumeFile `json:"items,omitempty"`
	DefaultMode *int32                  `json:"defaultMode,omitempty"`
}

// ProjectedVolumeSource merges several sources into one directory.
type ProjectedVolumeSource struct {
	Sources     []VolumeProjection `json:"sources"`
	DefaultMode *int32             `json:"defaultMode,omitempty"`
}

// VolumeProjection is one source of a projected volume; exactly one field
// is set.
type VolumeProjection struct {
	ConfigMap   *ConfigMapProjection   `json:"configMap,omitempty"`
	Secret      *SecretProjection      `json:"secret,omitempty"`
	DownwardAPI *DownwardAPIProjection `json:"downwardAPI,omitempty"`
}

// ConfigMapProjection projects a ConfigMap into a projected volume.
type ConfigMapProjection struct {
	Name     string      `json:"name"`
	Items    []KeyToPath `json:"items,omitempty"`
	Optional *bool       `json:"optional,omitempty"`
}

// SecretProjection projects a Secret into a projected volume.
type SecretProjection struct {
	Name     string      `json:"name"`
	Items    []KeyToPath `json:"items,omitempty"`
	Optional *bool       `json:"optional,omitempty"`
}

// DownwardAPIProjection projects instance fields into a projected volume.
type DownwardAPIProjection struct {
	Items []DownwardAPIVolumeFile `json:"items,omitempty"`
}
