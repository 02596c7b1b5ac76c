package schema

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeNodesKubernetesExport(t *testing.T) {
	nodes, err := DecodeNodesFile("testdata/nodes/kubernetes-nodelist.yaml")
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	pi := nodes[0]
	assert.Equal(t, "pi-gateway-01", pi.Name)
	assert.Equal(t, "plant-a", pi.Labels["site"])
	assert.Equal(t, []Taint{{Key: "edgeset.io/battery-low", Value: "true", Effect: TaintNoSchedule}}, pi.Taints)
	ready := pi.Condition(NodeReady)
	require.NotNil(t, ready)
	assert.Equal(t, NodeCondition{
		Type: NodeReady, Status: ConditionTrue, Since: time.Date(2025, 5, 30, 7, 16, 0, 0, time.UTC),
		Reason: "KubeletReady", Message: "kubelet is posting ready status",
	}, *ready)
	assert.Equal(t, ResourceList{"cpu": "4", "ephemeral-storage": "30412Mi", "memory": "3982Mi", "pods": "110"}, pi.Capacity)
	assert.Equal(t, NodeInfo{
		OS: "linux", Arch: "arm64", Hostname: "pi-gateway-01", KernelVersion: "6.1.0-rpi7-rpi-v8",
		Runtime: "containerd", RuntimeVersion: "1.7.15-k3s1",
	}, pi.Info)
	assert.Equal(t, []NodeAddress{{Type: "InternalIP", Address: "192.168.10.21"}, {Type: "Hostname", Address: "pi-gateway-01"}}, pi.Addresses)

	ipc := nodes[1]
	assert.True(t, ipc.Unschedulable)
	assert.Equal(t, "docker", ipc.Info.Runtime)
	require.Len(t, ipc.Taints, 2)
	require.NotNil(t, ipc.Taints[1].TimeAdded)
	assert.Equal(t, time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC), *ipc.Taints[1].TimeAdded)
}

func TestDecodeNodesEdgesetFile(t *testing.T) {
	nodes, err := DecodeNodesFile("testdata/nodes/edgeset-nodes.yaml")
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Equal(t, Node{
		Name: "sensor-hub-17",
		Labels: map[string]string{
			LabelArch: "arm", LabelOS: "linux", "edgeset.io/fieldbus": "modbus", "site": "plant-b",
		},
		Taints:     []Taint{{Key: "edgeset.io/metered-link", Value: "lte", Effect: TaintPreferNoSchedule}},
		Conditions: []NodeCondition{{Type: NodeReady, Status: ConditionTrue, Since: time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)}},
		Addresses:  []NodeAddress{{Type: "InternalIP", Address: "10.8.0.17"}},
		Capacity:   ResourceList{"cpu": "1", "memory": "512Mi"},
		Info: NodeInfo{
			OS: "linux", Arch: "arm", Hostname: "sensor-hub-17", KernelVersion: "5.10.110",
			AgentVersion: "v0.1.0", Runtime: "docker", RuntimeVersion: "20.10.24",
		},
	}, nodes[0])
	assert.Equal(t, "camera-04", nodes[1].Name)
	assert.True(t, nodes[1].Unschedulable)
}

func TestDecodeNodesJSON(t *testing.T) {
	nodes, err := DecodeNodes("n.json", []byte(`{"apiVersion":"v1","kind":"NodeList","items":[
		{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"x":"y"}},"status":{"volumesInUse":[]}},
		{"name":"b"}
	]}`))
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Equal(t, "a", nodes[0].Name)
	assert.Equal(t, "b", nodes[1].Name)
}

func TestDecodeNodesErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "edgeset node with unknown field",
			in:   "name: a\nlables: {x: y}\n",
			want: []string{"n.yaml:2: lables: unknown field"},
		},
		{
			name: "kubernetes node without name",
			in:   "apiVersion: v1\nkind: Node\nmetadata:\n  labels: {x: y}\n",
			want: []string{"n.yaml:3: metadata.name: required"},
		},
		{
			name: "kubernetes node with malformed known fields",
			in: "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\nspec:\n  taints:\n  - key: k\n    effect: Sometimes\n" +
				"status:\n  conditions:\n  - type: Ready\n    status: Maybe\n  capacity:\n    cpu: lots\n",
			want: []string{
				`n.yaml:8: spec.taints[0].effect: unsupported effect "Sometimes": want NoSchedule, PreferNoSchedule or NoExecute`,
				`n.yaml:12: status.conditions[0].status: unsupported status "Maybe": want True, False or Unknown`,
				`n.yaml:14: status.capacity[cpu]: quantity "lots": must be a number with an optional unit suffix`,
			},
		},
		{
			name: "kubernetes node with wrong types",
			in:   "apiVersion: v1\nkind: Node\nmetadata:\n  name: [a]\nspec:\n  unschedulable: maybe\n",
			want: []string{
				"n.yaml:4: metadata.name: must be a string, not a list",
				"n.yaml:6: spec.unschedulable: must be a boolean (true or false), not a string",
			},
		},
		{
			name: "list item of another kind",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n",
			want: []string{`n.yaml:4: items[0]: unsupported node document (apiVersion "v1", kind "Pod"): want a Kubernetes v1 Node, an edgeset.io/v1 Node, or a bare edgeset node`},
		},
		{
			name: "list item error names the item",
			in:   "kind: NodeList\napiVersion: v1\nitems:\n- name: ok\n- name: Not_OK\n",
			want: []string{`n.yaml:5: items[1].name: invalid node name "Not_OK": must be a DNS-1123 subdomain`},
		},
		{
			name: "bad time",
			in:   "name: a\nconditions:\n- type: Ready\n  status: \"True\"\n  since: yesterday\n",
			want: []string{`n.yaml:5: conditions[0].since: must be an RFC 3339 time such as 2025-06-01T08:00:00Z, not "yesterday"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes, err := DecodeNodes("n.yaml", []byte(tc.in))
			assert.Nil(t, nodes)
			assert.Equal(t, tc.want, problems(t, err))
		})
	}
}
