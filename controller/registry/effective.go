// Package registry is the controller's model of the fleet's nodes: what each
// agent announced, its presence on the broker, and the operator's overrides,
// merged into the effective schema.Node that placement decides on.
//
// Effective is a pure function; Registry holds the inputs in memory behind a
// mutex. Neither does I/O or reads the clock: callers pass now.
package registry

import (
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Condition reason and message set on a node whose presence has been lost for
// longer than the offline grace period, as the Kubernetes node lifecycle
// controller sets them.
const (
	ReasonNodeStatusUnknown  = "NodeStatusUnknown"
	MessageNodeStatusUnknown = "Agent disconnected from the broker for longer than the offline grace period."
)

// NodeInput is everything the controller knows about one node before it is
// merged: the last announced status, the presence, and the overrides.
type NodeInput struct {
	// Name is the node's name, the {node} of its topics.
	Name string
	// Status is the last status the agent announced; nil until it has
	// announced one. Only nodes with a status are part of a Snapshot.
	Status *schema.NodeStatus
	// Presence is the node's connection state.
	Presence Presence
	// Overrides are the operator's changes; they win over the announced
	// status.
	Overrides Overrides
}

// Presence is a node's connection state as last reported on its online
// topic.
type Presence struct {
	// Known is false until a presence message arrived; an unknown presence
	// counts as offline since Since.
	Known bool
	// Online reports whether the agent is connected.
	Online bool
	// Session identifies the agent's connection (schema.Presence.Session).
	Session int64
	// Since is when Online last changed, or when the controller first
	// learned of the node. While offline it starts the grace period; a zero
	// Since while offline means offline for ever (grace expired). Registry
	// always sets it.
	Since time.Time
}

// Overrides are an operator's changes to what a node announces.
type Overrides struct {
	// Labels sets (non-nil value) or removes (nil value) labels.
	Labels map[string]*string `json:"labels,omitempty"`
	// Taints are added, replacing any announced taint with the same key and
	// effect.
	Taints []schema.Taint `json:"taints,omitempty"`
	// RemovedTaints names announced taints to drop, as "key:effect".
	RemovedTaints []string `json:"removedTaints,omitempty"`
	// Unschedulable, when set, cordons (true) or uncordons (false) the node.
	Unschedulable *bool `json:"unschedulable,omitempty"`
}

// IsZero reports whether o changes nothing.
func (o Overrides) IsZero() bool {
	return len(o.Labels) == 0 && len(o.Taints) == 0 && len(o.RemovedTaints) == 0 && o.Unschedulable == nil
}

// TaintRef returns the "key:effect" form RemovedTaints uses for t.
func TaintRef(t schema.Taint) string { return t.Key + ":" + t.Effect }

// conditionTaints maps a condition type and the status that makes it
// unhealthy to the taint the controller adds, in the order taints are added.
var conditionTaints = []struct {
	condition, status, taint, effect string
}{
	{schema.NodeReady, schema.ConditionFalse, schema.TaintNodeNotReady, schema.TaintNoExecute},
	{schema.NodeReady, schema.ConditionUnknown, schema.TaintNodeUnreachable, schema.TaintNoExecute},
	{schema.NodeDiskPressure, schema.ConditionTrue, schema.TaintNodeDiskPressure, schema.TaintNoSchedule},
	{schema.NodeMemoryPressure, schema.ConditionTrue, schema.TaintNodeMemoryPressure, schema.TaintNoSchedule},
	{schema.NodePIDPressure, schema.ConditionTrue, schema.TaintNodePIDPressure, schema.TaintNoSchedule},
	{schema.NodeNetworkUnavailable, schema.ConditionTrue, schema.TaintNodeNetworkUnavailable, schema.TaintNoSchedule},
}

// lifecycleTaint reports whether key is a taint the controller derives from
// conditions and presence. An agent cannot set these: announced taints with
// these keys are dropped. An operator can (an override taint wins).
func lifecycleTaint(key string) bool {
	switch key {
	case schema.TaintNodeNotReady, schema.TaintNodeUnreachable,
		schema.TaintNodeDiskPressure, schema.TaintNodeMemoryPressure,
		schema.TaintNodePIDPressure, schema.TaintNodeNetworkUnavailable:
		return true
	}
	return false
}

// Effective returns the node the controller schedules on, and when that node
// will next change by itself (zero if it will not without new input).
//
// It merges the announced status with the overrides (overrides win: labels
// set or removed, taints replaced by key and effect, announced taints
// removed, unschedulable), then applies the Kubernetes node lifecycle:
//
//   - A node offline for at least grace (from Presence.Since) has every
//     condition set to Unknown with reason NodeStatusUnknown and since the
//     moment it went offline (Ready is added if it was not announced), and
//     is tainted node.kubernetes.io/unreachable:NoExecute with TimeAdded
//     the grace expiry. Until then it keeps its announced conditions and
//     the returned time is the grace expiry.
//   - Every unhealthy condition adds its taint, TimeAdded the condition's
//     Since (nil if zero) so tolerationSeconds count from when it happened:
//     Ready False not-ready:NoExecute, Ready Unknown unreachable:NoExecute,
//     DiskPressure, MemoryPressure, PIDPressure and NetworkUnavailable True
//     the matching NoSchedule taint.
//   - Unschedulable is carried as Node.Unschedulable; no taint is added for
//     it (placement treats the flag as the unschedulable taint).
//
// Lifecycle taints are owned by the controller: announced ones are ignored,
// a derived one is not added where an override taint has the same key and
// effect, and RemovedTaints never removes them. So a node that comes back
// online loses its unreachable taint. Effective neither keeps nor modifies
// in's maps and slices: the result is a fresh copy.
func Effective(in NodeInput, now time.Time, grace time.Duration) (schema.Node, time.Time) {
	return effective(in, now, grace, false)
}

// effective is Effective. With shared, the result shares in.Status's maps
// and slices wherever it holds them unchanged (labels without label
// overrides, conditions of a node not unreachable, addresses, capacity):
// for a read-only model of a status that is never modified in place, as
// the Registry's cache is, at the cost of no second copy per node.
func effective(in NodeInput, now time.Time, grace time.Duration, shared bool) (schema.Node, time.Time) {
	expiry := in.Presence.Since.Add(grace)
	unreachable := !in.Presence.Online && !now.Before(expiry)
	n := announced(in, shared, unreachable)
	applyOverrides(&n, in.Overrides)
	var next, unreachableAt time.Time
	switch {
	case unreachable:
		markUnreachable(&n, in.Presence.Since)
		unreachableAt = expiry
	case !in.Presence.Online:
		next = expiry
	}
	addConditionTaints(&n, in.Overrides.Taints, unreachableAt)
	return n, next
}

// announced returns what the agent announced, without lifecycle taints: a
// copy, or with shared (see effective) sharing the maps and slices that
// the overrides (and, for an unreachable node, the lifecycle) leave as
// they are. Either way nil and empty come out as a copy has them.
func announced(in NodeInput, shared, unreachable bool) schema.Node {
	n := schema.Node{Name: in.Name}
	s := in.Status
	if s == nil {
		return n
	}
	if shared && s.Labels != nil && len(in.Overrides.Labels) == 0 {
		n.Labels = s.Labels
	} else {
		n.Labels = make(map[string]string, len(s.Labels)+len(in.Overrides.Labels))
		for k, v := range s.Labels {
			n.Labels[k] = v
		}
	}
	for _, t := range s.Taints {
		if !lifecycleTaint(t.Key) {
			n.Taints = append(n.Taints, copyTaint(t))
		}
	}
	if shared && !unreachable && len(s.Conditions) > 0 {
		n.Conditions = s.Conditions[:len(s.Conditions):len(s.Conditions)]
	} else {
		n.Conditions = append([]schema.NodeCondition(nil), s.Conditions...)
	}
	if shared && len(s.Addresses) > 0 {
		n.Addresses = s.Addresses[:len(s.Addresses):len(s.Addresses)]
	} else {
		n.Addresses = append([]schema.NodeAddress(nil), s.Addresses...)
	}
	if shared {
		n.Capacity = s.Capacity
	} else if s.Capacity != nil {
		n.Capacity = make(schema.ResourceList, len(s.Capacity))
		for k, v := range s.Capacity {
			n.Capacity[k] = v
		}
	}
	n.Info = s.Info
	return n
}

// applyOverrides merges o into n.
func applyOverrides(n *schema.Node, o Overrides) {
	for k, v := range o.Labels {
		if v == nil {
			delete(n.Labels, k)
			continue
		}
		if n.Labels == nil {
			n.Labels = make(map[string]string, len(o.Labels))
		}
		n.Labels[k] = *v
	}
	if len(o.RemovedTaints) > 0 {
		n.Taints = removeTaints(n.Taints, o.RemovedTaints)
	}
	for _, t := range o.Taints {
		n.Taints = putTaint(n.Taints, copyTaint(t))
	}
	if o.Unschedulable != nil {
		n.Unschedulable = *o.Unschedulable
	}
}

// removeTaints drops the taints named "key:effect" in refs, in place.
func removeTaints(taints []schema.Taint, refs []string) []schema.Taint {
	kept := taints[:0]
	for _, t := range taints {
		if !containsRef(refs, t) {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

func containsRef(refs []string, t schema.Taint) bool {
	for _, r := range refs {
		key, effect, ok := strings.Cut(r, ":")
		if ok && key == t.Key && effect == t.Effect {
			return true
		}
	}
	return false
}

// putTaint replaces the taint with t's key and effect, or appends t.
func putTaint(taints []schema.Taint, t schema.Taint) []schema.Taint {
	if i := taintIndex(taints, t.Key, t.Effect); i >= 0 {
		taints[i] = t
		return taints
	}
	return append(taints, t)
}

func taintIndex(taints []schema.Taint, key, effect string) int {
	for i, t := range taints {
		if t.Key == key && t.Effect == effect {
			return i
		}
	}
	return -1
}

func copyTaint(t schema.Taint) schema.Taint {
	if t.TimeAdded != nil {
		at := *t.TimeAdded
		t.TimeAdded = &at
	}
	return t
}

// markUnreachable sets every condition of n to Unknown since offlineSince, as
// for a node whose presence was lost at offlineSince, adding Ready if absent.
func markUnreachable(n *schema.Node, offlineSince time.Time) {
	for i := range n.Conditions {
		c := &n.Conditions[i]
		c.Status = schema.ConditionUnknown
		c.Since = offlineSince
		c.Reason = ReasonNodeStatusUnknown
		c.Message = MessageNodeStatusUnknown
	}
	if n.Condition(schema.NodeReady) == nil {
		n.Conditions = append(n.Conditions, schema.NodeCondition{
			Type:    schema.NodeReady,
			Status:  schema.ConditionUnknown,
			Since:   offlineSince,
			Reason:  ReasonNodeStatusUnknown,
			Message: MessageNodeStatusUnknown,
		})
	}
}

// addConditionTaints adds the taint of every unhealthy condition of n unless
// an override taint has the same key and effect. A non-zero unreachableAt
// (the grace expiry of an offline node) is the TimeAdded of the unreachable
// taint; other taints take their condition's Since.
func addConditionTaints(n *schema.Node, overrides []schema.Taint, unreachableAt time.Time) {
	for _, ct := range conditionTaints {
		c := n.Condition(ct.condition)
		if c == nil || c.Status != ct.status {
			continue
		}
		if taintIndex(overrides, ct.taint, ct.effect) >= 0 {
			continue
		}
		t := schema.Taint{Key: ct.taint, Effect: ct.effect}
		at := c.Since
		if ct.taint == schema.TaintNodeUnreachable && !unreachableAt.IsZero() {
			at = unreachableAt
		}
		if !at.IsZero() {
			t.TimeAdded = &at
		}
		n.Taints = append(n.Taints, t)
	}
}
