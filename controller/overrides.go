package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// UpdateNode merges patch into the node's stored overrides. Invalid label
// keys or taints are rejected, naming the field, and change nothing; so is
// a new value for a label the node has, unless patch.Overwrite is set
// (kubectl label --overwrite). The read, the merge and the write are one
// store transaction, and concurrent updates are serialised with passMu
// (which DeleteNode holds too), so none loses another's change and the
// registry sees the overrides in the order they were stored.
func (c *Controller) UpdateNode(ctx context.Context, name string, patch api.NodePatch) (api.Node, error) {
	if err := validatePatch(patch); err != nil {
		return api.Node{}, err
	}
	c.passMu.Lock()
	err := c.updateNodeLocked(name, patch)
	c.passMu.Unlock()
	if err != nil {
		return api.Node{}, err
	}
	c.events.add(nodeObject(name), schema.EventNormal, "OverridesChanged", describePatch(patch))
	c.wake()
	return c.GetNode(ctx, name)
}

// updateNodeLocked stores patch over the node's overrides, with passMu
// held, and puts them in the registry.
func (c *Controller) updateNodeLocked(name string, patch api.NodePatch) error {
	in, ok := c.registry.Input(name)
	if !ok {
		nodes, _ := c.registry.Snapshot(c.now(), c.cfg.NodeOfflineGrace)
		return c.unknownNode(name, nodes)
	}
	o, err := c.store.UpdateOverrides(name, func(o *store.NodeOverrides) error {
		if !patch.Overwrite {
			if err := checkNoOverwrite(name, in.Status, *o, patch.Labels); err != nil {
				return err
			}
		}
		*o = mergePatch(*o, patch, c.now())
		o.UpdatedAt = c.now()
		return nil
	})
	if err != nil {
		return err
	}
	c.registry.SetOverrides(name, overridesFromStore(o), o.UpdatedAt)
	c.state.markNode(name)

	return nil
}

// checkNoOverwrite refuses, as kubectl label does without --overwrite, to
// give a label the node has (announced, or set by an override) another
// value; setting the same value and removing a label are allowed.
func checkNoOverwrite(node string, announced *schema.NodeStatus, o store.NodeOverrides, labels map[string]*string) error {
	var problems []string
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		if v == nil {
			continue
		}
		cur, has := currentLabel(announced, o, k)
		if has && cur != *v {
			problems = append(problems, fmt.Sprintf("'%s' already has a value (%s), and --overwrite is false", k, cur))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: node %s: %s", api.ErrInvalid, node, strings.Join(problems, "; "))
}

// currentLabel is the node's label k: the override's when it sets or
// removes k, else the announced one.
func currentLabel(announced *schema.NodeStatus, o store.NodeOverrides, k string) (string, bool) {
	if v, ok := o.Labels[k]; ok {
		if v == nil {
			return "", false
		}
		return *v, true
	}
	if announced == nil {
		return "", false
	}
	v, ok := announced.Labels[k]
	return v, ok
}

// validatePatch checks label keys and values and taints, reporting every
// problem with its field path.
func validatePatch(p api.NodePatch) error {
	var verr schema.ValidationError
	add := func(field, format string, args ...any) {
		verr.Errors = append(verr.Errors, schema.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	for k, v := range p.Labels {
		if msg := schema.LabelKeyProblem(k); msg != "" {
			add("labels["+k+"]", "%s", msg)
		}
		if v != nil {
			if msg := schema.LabelValueProblem(*v); msg != "" {
				add("labels["+k+"]", "%s", msg)
			}
		}
		if k == schema.LabelPrefetch && v != nil {
			add("labels["+k+"]", "set only by the node's agent, which announces it when it understands prefetch lists: "+
				"an agent that does not would refuse its desired states (removing it opts the node out of prefetching)")
		}
	}
	for i, t := range p.AddTaints {
		if msg := schema.LabelKeyProblem(t.Key); msg != "" {
			add(fmt.Sprintf("addTaints[%d].key", i), "%s", msg)
		}
		if msg := schema.LabelValueProblem(t.Value); msg != "" {
			add(fmt.Sprintf("addTaints[%d].value", i), "%s", msg)
		}
		switch t.Effect {
		case schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute:
		default:
			add(fmt.Sprintf("addTaints[%d].effect", i), "%q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
		}
	}
	for i, ref := range p.RemoveTaints {
		if msg := taintRefProblem(ref); msg != "" {
			add(fmt.Sprintf("removeTaints[%d]", i), "%q: %s", ref, msg)
		}
	}
	if len(verr.Errors) > 0 {
		return &verr
	}
	return nil
}

// mergePatch applies p to the stored overrides o; a taint it adds is
// stamped added at now.
// taintRefProblem says what is wrong with a taint reference of
// removeTaints, "key:effect" or "key" (a value has no place in it: kubectl's
// "key=value:Effect-" form is the CLI's to translate); "" when it is valid.
func taintRefProblem(ref string) string {
	key, effect, hasEffect := strings.Cut(ref, ":")
	if strings.Contains(key, "=") {
		return "want key:effect or key, without a value"
	}
	if msg := schema.LabelKeyProblem(key); msg != "" {
		return msg
	}
	if !hasEffect {
		return ""
	}
	switch effect {
	case schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute:
		return ""
	}
	return "effect must be NoSchedule, PreferNoSchedule or NoExecute"
}

func mergePatch(o store.NodeOverrides, p api.NodePatch, now time.Time) store.NodeOverrides {
	if len(p.Labels) > 0 && o.Labels == nil {
		o.Labels = map[string]*string{}
	}
	for k, v := range p.Labels {
		o.Labels[k] = v
	}
	for _, ref := range p.RemoveTaints {
		o.Taints, o.RemovedTaints = removeTaint(o.Taints, o.RemovedTaints, ref)
	}
	for _, t := range p.AddTaints {
		ref := registry.TaintRef(t)
		o.Taints = slices.DeleteFunc(o.Taints, func(x schema.Taint) bool { return registry.TaintRef(x) == ref })
		o.RemovedTaints = slices.DeleteFunc(o.RemovedTaints, func(r string) bool { return r == ref })
		added := now
		t.TimeAdded = &added
		o.Taints = append(o.Taints, t)
	}
	if p.Unschedulable != nil {
		o.Unschedulable = p.Unschedulable
	}
	return o
}

// removeTaint drops override taints matching ref ("key:effect" or "key")
// and records the removal of announced ones.
func removeTaint(taints []schema.Taint, removed []string, ref string) ([]schema.Taint, []string) {
	key, effect, hasEffect := strings.Cut(ref, ":")
	matches := func(t schema.Taint) bool { return t.Key == key && (!hasEffect || t.Effect == effect) }
	taints = slices.DeleteFunc(taints, matches)
	effects := []string{effect}
	if !hasEffect {
		effects = []string{schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute}
	}
	for _, e := range effects {
		if r := key + ":" + e; !slices.Contains(removed, r) {
			removed = append(removed, r)
		}
	}
	return taints, removed
}

func describePatch(p api.NodePatch) string {
	var parts []string
	for _, k := range sortedKeys(p.Labels) {
		if v := p.Labels[k]; v != nil {
			parts = append(parts, "label "+k+"="+*v)
		} else {
			parts = append(parts, "label "+k+" removed")
		}
	}
	for _, t := range p.AddTaints {
		parts = append(parts, "taint "+registry.TaintRef(t)+" added")
	}
	for _, r := range p.RemoveTaints {
		parts = append(parts, "taint "+r+" removed")
	}
	if p.Unschedulable != nil {
		parts = append(parts, map[bool]string{true: "cordoned", false: "uncordoned"}[*p.Unschedulable])
	}
	return strings.Join(parts, ", ")
}
