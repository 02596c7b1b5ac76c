package schema

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// APIVersionKubernetesCore is the group version of Kubernetes Node objects.
const APIVersionKubernetesCore = "v1"

// DecodeNodes reads the nodes of a node file, YAML (multi-document) or
// JSON, for offline tools such as `edgesetctl explain`. Each document, or
// each item of a kind: List or kind: NodeList, is one of:
//
//   - a Kubernetes Node (apiVersion v1, kind Node), as `kubectl get node -o
//     yaml` exports it. Fields edgeset does not read are ignored, since real
//     exports carry many; the fields it reads must be well formed. It reads
//     metadata.name and labels, spec.taints and unschedulable,
//     status.conditions (lastTransitionTime becomes Since),
//     status.addresses, status.capacity and status.nodeInfo
//     (operatingSystem, architecture, kernelVersion, and
//     containerRuntimeVersion "runtime://version").
//   - an edgeset node: the JSON shape of Node (name, labels, taints,
//     conditions, unschedulable, addresses, capacity, info) either bare,
//     with no apiVersion or kind, or wrapped with apiVersion edgeset.io/v1
//     and kind Node at the same level. Unknown fields are errors.
//
// Every node must have a valid name, labels, taints (known effects),
// conditions (True, False or Unknown) and capacity quantities. The error is
// a *ValidationError listing every problem with file and line, or a syntax
// error.
func DecodeNodes(name string, data []byte) ([]Node, error) {
	docs, err := parseYAML(name, data)
	if err != nil {
		return nil, err
	}
	d := &nodeDecoder{file: name}
	for _, doc := range docs {
		if doc == nil {
			continue
		}
		if kind, _ := scalarValue(doc, "kind"); kind == KindList || kind == KindNodeList {
			d.list(doc)
		} else {
			d.node(doc, "")
		}
	}
	if len(d.errs) > 0 {
		sortByLine(d.errs, func(e FieldError) int { return e.Line })
		return nil, &ValidationError{Errors: d.errs}
	}
	return d.nodes, nil
}

// DecodeNodesFile reads a node file (see DecodeNodes).
func DecodeNodesFile(path string) ([]Node, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	return DecodeNodes(path, data)
}

// nodeDecoder accumulates the nodes and problems of one node file.
type nodeDecoder struct {
	file  string
	nodes []Node
	errs  []FieldError
}

func (d *nodeDecoder) errorAt(line int, field, format string, args ...any) {
	d.errs = append(d.errs, FieldError{File: d.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (d *nodeDecoder) list(n *yaml.Node) {
	items := mappingValue(n, "items")
	if items == nil || items.Kind != yaml.SequenceNode {
		d.errorAt(n.Line, "items", "required: a list must have a list of items")
		return
	}
	for i, item := range items.Content {
		d.node(item, fmt.Sprintf("items[%d]", i))
	}
}

// node decodes one node document or list item; prefix names the item.
func (d *nodeDecoder) node(n *yaml.Node, prefix string) {
	if n.Kind != yaml.MappingNode {
		d.errorAt(n.Line, prefix, "must be an object, not %s", describe(n))
		return
	}
	apiVersion, _ := scalarValue(n, "apiVersion")
	kind, _ := scalarValue(n, "kind")
	switch {
	case apiVersion == APIVersionKubernetesCore && kind == KindNode:
		d.kubernetesNode(n, prefix)
	case (apiVersion == APIVersionEdgeset && kind == KindNode) || (apiVersion == "" && kind == ""):
		d.edgesetNode(n, prefix)
	default:
		d.errorAt(n.Line, prefix, "unsupported node document (apiVersion %q, kind %q): want a Kubernetes v1 Node, an edgeset.io/v1 Node, or a bare edgeset node", apiVersion, kind)
	}
}

// edgesetNodeDoc is an edgeset node, optionally wrapped with TypeMeta.
type edgesetNodeDoc struct {
	TypeMeta `json:",inline"`
	Node     `json:",inline"`
}

func (d *nodeDecoder) edgesetNode(n *yaml.Node, prefix string) {
	var doc edgesetNodeDoc
	index, ok := d.walk(n, prefix, true, &doc)
	if ok {
		d.add(doc.Node, edgesetNodeFields, index, prefix)
	}
}

func (d *nodeDecoder) kubernetesNode(n *yaml.Node, prefix string) {
	var k kubernetesNode
	index, ok := d.walk(n, prefix, false, &k)
	if ok {
		d.add(k.toNode(), k8sNodeFields, index, prefix)
	}
}

// walk checks n against into's type and decodes it. Lenient walks skip
// unknown fields.
func (d *nodeDecoder) walk(n *yaml.Node, prefix string, strict bool, into any) (map[string]position, bool) {
	w := newWalker(strict, nil)
	root := fieldPath{prefix, prefix}
	w.index[prefix] = position{line: n.Line, src: prefix}
	value, _ := w.walk(n, reflect.TypeOf(into).Elem(), root)
	for _, fe := range w.errs {
		d.errorAt(fe.Line, fe.Field, "%s", fe.Message)
	}
	if len(w.errs) > 0 {
		return nil, false
	}
	if err := decodeJSON(value, into); err != nil {
		d.errorAt(n.Line, prefix, "%v", err)
		return nil, false
	}
	return w.index, true
}

// add validates a decoded node and keeps it when valid.
func (d *nodeDecoder) add(node Node, names nodeFieldNames, index map[string]position, prefix string) {
	var errs fieldErrors
	nameField := "name"
	if names == k8sNodeFields {
		nameField = "metadata.name"
	}
	validateNodeName(&errs, nameField, node.Name)
	validateNodeFields(&errs, names, &node)
	var ve *ValidationError
	if errors.As(errs.err(), &ve) {
		for _, fe := range ve.Errors {
			field := fe.Field
			if prefix != "" {
				field = prefix + "." + field
			}
			src, line := locate(index, field)
			d.errorAt(line, src, "%s", fe.Message)
		}
		return
	}
	d.nodes = append(d.nodes, node)
}

// kubernetesNode is the part of a Kubernetes v1 Node that edgeset reads.
type kubernetesNode struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Taints        []Taint `json:"taints"`
		Unschedulable bool    `json:"unschedulable"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type               string    `json:"type"`
			Status             string    `json:"status"`
			LastTransitionTime time.Time `json:"lastTransitionTime"`
			Reason             string    `json:"reason"`
			Message            string    `json:"message"`
		} `json:"conditions"`
		Addresses []NodeAddress `json:"addresses"`
		Capacity  ResourceList  `json:"capacity"`
		NodeInfo  struct {
			OperatingSystem         string `json:"operatingSystem"`
			Architecture            string `json:"architecture"`
			KernelVersion           string `json:"kernelVersion"`
			ContainerRuntimeVersion string `json:"containerRuntimeVersion"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

// toNode maps a Kubernetes Node onto edgeset's node model. The hostname
// comes from the kubernetes.io/hostname label, else a Hostname address.
func (k *kubernetesNode) toNode() Node {
	n := Node{
		Name:          k.Metadata.Name,
		Labels:        k.Metadata.Labels,
		Taints:        k.Spec.Taints,
		Unschedulable: k.Spec.Unschedulable,
		Addresses:     k.Status.Addresses,
		Capacity:      k.Status.Capacity,
		Info: NodeInfo{
			OS:            k.Status.NodeInfo.OperatingSystem,
			Arch:          k.Status.NodeInfo.Architecture,
			KernelVersion: k.Status.NodeInfo.KernelVersion,
			Hostname:      k.Metadata.Labels[LabelHostname],
		},
	}
	if rt, ver, ok := strings.Cut(k.Status.NodeInfo.ContainerRuntimeVersion, "://"); ok {
		n.Info.Runtime, n.Info.RuntimeVersion = rt, ver
	} else {
		n.Info.RuntimeVersion = k.Status.NodeInfo.ContainerRuntimeVersion
	}
	for _, a := range n.Addresses {
		if n.Info.Hostname == "" && a.Type == "Hostname" {
			n.Info.Hostname = a.Address
		}
	}
	for _, c := range k.Status.Conditions {
		n.Conditions = append(n.Conditions, NodeCondition{
			Type: c.Type, Status: c.Status, Since: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return n
}
