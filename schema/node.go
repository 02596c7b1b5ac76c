package schema

import "time"

// Taint effects.
const (
	TaintNoSchedule       = "NoSchedule"
	TaintPreferNoSchedule = "PreferNoSchedule"
	TaintNoExecute        = "NoExecute"
)

// Well-known taints, set by the controller from node conditions and
// presence exactly as the Kubernetes node lifecycle controller does.
const (
	TaintNodeNotReady           = "node.kubernetes.io/not-ready"
	TaintNodeUnreachable        = "node.kubernetes.io/unreachable"
	TaintNodeUnschedulable      = "node.kubernetes.io/unschedulable"
	TaintNodeDiskPressure       = "node.kubernetes.io/disk-pressure"
	TaintNodeMemoryPressure     = "node.kubernetes.io/memory-pressure"
	TaintNodePIDPressure        = "node.kubernetes.io/pid-pressure"
	TaintNodeNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

// Well-known labels, set by the agent as kubelet sets them.
const (
	LabelHostname     = "kubernetes.io/hostname"
	LabelOS           = "kubernetes.io/os"
	LabelArch         = "kubernetes.io/arch"
	LabelAgentVersion = "edgeset.io/agent-version"
	LabelRuntime      = "edgeset.io/runtime"
)

// Node condition types.
const (
	NodeReady              = "Ready"
	NodeDiskPressure       = "DiskPressure"
	NodeMemoryPressure     = "MemoryPressure"
	NodePIDPressure        = "PIDPressure"
	NodeNetworkUnavailable = "NetworkUnavailable"
)

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Node is what the controller knows about a device: what it announced,
// merged with the operator's overrides.
type Node struct {
	Name          string            `json:"name"`
	Labels        map[string]string `json:"labels,omitempty"`
	Taints        []Taint           `json:"taints,omitempty"`
	Conditions    []NodeCondition   `json:"conditions,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
	Addresses     []NodeAddress     `json:"addresses,omitempty"`
	Capacity      ResourceList      `json:"capacity,omitempty"`
	Info          NodeInfo          `json:"info,omitempty"`
}

// Condition returns the condition of type typ, or nil.
func (n *Node) Condition(typ string) *NodeCondition {
	for i := range n.Conditions {
		if n.Conditions[i].Type == typ {
			return &n.Conditions[i]
		}
	}
	return nil
}

// Taint is a node property that repels daemons without a toleration.
type Taint struct {
	Key       string     `json:"key"`
	Value     string     `json:"value,omitempty"`
	Effect    string     `json:"effect"`
	TimeAdded *time.Time `json:"timeAdded,omitempty"`
}

// NodeCondition is one measured aspect of a node's health.
type NodeCondition struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Since   time.Time `json:"since,omitzero"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
}

// NodeAddress is one address of a node.
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// NodeInfo describes the device and its agent.
type NodeInfo struct {
	OS             string `json:"os,omitempty"`
	Arch           string `json:"arch,omitempty"`
	Hostname       string `json:"hostname,omitempty"`
	KernelVersion  string `json:"kernelVersion,omitempty"`
	AgentVersion   string `json:"agentVersion,omitempty"`
	Runtime        string `json:"runtime,omitempty"`
	RuntimeVersion string `json:"runtimeVersion,omitempty"`
}
