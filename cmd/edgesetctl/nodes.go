package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/schema"
)

// nodeNameArg accepts "node NAME", "no NAME" or "node/NAME".
func nodeNameArg(args []string) (name string, rest []string, err error) {
	if len(args) == 0 {
		return "", nil, usageError{errors.New("want node NAME")}
	}
	kind, name, err := resourceKind(args[0])
	if err != nil || kind != kindNode {
		return "", nil, usageError{errors.New("want node NAME (or node/NAME)")}
	}
	rest = args[1:]
	if name == "" {
		if len(rest) == 0 {
			return "", nil, usageError{errors.New("want node NAME")}
		}
		name, rest = rest[0], rest[1:]
	}
	return name, rest, nil
}

func newLabelCmd(s *streams) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "label node NAME KEY=VALUE... KEY-...",
		Short: "Set (k=v) or remove (k-) labels of a node, over what it announces",
		Long: `label sets operator labels on a node. They win over the labels the agent
announces and survive its re-announcements; k- removes a label (also an
announced one). As with kubectl, changing the value of a label the node
already has needs --overwrite.`,
		Example: "  edgesetctl label node gw-0042 site=berlin tier-\n  edgesetctl label node gw-0042 site=paris --overwrite",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rest, err := nodeNameArg(args)
			if err != nil {
				return err
			}
			patch, err := parseLabelArgs(rest)
			if err != nil {
				return err
			}
			patch.Overwrite = overwrite
			return labelNode(cmd, s, name, patch)
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "allow changing the value of a label the node already has")
	return cmd
}

// labelNode checks patch against the node's labels as kubectl label does
// (a changed value needs Overwrite; removing an absent label is noted),
// sends it when it changes something and prints labeled, unlabeled or
// not labeled. The controller refuses a changed value without Overwrite
// too, so a label set meanwhile is not overwritten.
func labelNode(cmd *cobra.Command, s *streams, name string, patch api.NodePatch) error {
	c, cfg, err := newAPIClient(cmd)
	if err != nil {
		return err
	}
	node, err := c.GetNode(cmd.Context(), name)
	if err != nil {
		return cfg.explain(err)
	}
	var set, removed bool
	for _, k := range slices.Sorted(maps.Keys(patch.Labels)) {
		old, has := node.Labels[k]
		v := patch.Labels[k]
		switch {
		case v == nil && !has:
			fmt.Fprintf(s.out, "label %q not found.\n", k)
		case v == nil:
			removed = true
		case has && old == *v:
		case has && !patch.Overwrite:
			return fmt.Errorf("'%s' already has a value (%s), and --overwrite is false", k, old)
		default:
			set = true
		}
	}
	if !set && !removed {
		fmt.Fprintf(s.out, "node/%s not labeled\n", name)
		return nil
	}
	if _, err := c.UpdateNode(cmd.Context(), name, patch); err != nil {
		return cfg.explain(err)
	}
	done := "labeled"
	if !set {
		done = "unlabeled"
	}
	fmt.Fprintf(s.out, "node/%s %s\n", name, done)
	return nil
}

func parseLabelArgs(args []string) (api.NodePatch, error) {
	if len(args) == 0 {
		return api.NodePatch{}, usageError{errors.New("no labels given: want KEY=VALUE or KEY-")}
	}
	p := api.NodePatch{Labels: map[string]*string{}}
	for _, a := range args {
		if k, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
			p.Labels[k] = nil
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return p, usageError{fmt.Errorf("label %q: want KEY=VALUE or KEY-", a)}
		}
		p.Labels[k] = &v
	}
	return p, nil
}

func newTaintCmd(s *streams) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "taint node NAME KEY[=VALUE]:EFFECT... KEY[=VALUE]:EFFECT-... KEY-...",
		Short: "Add or remove taints of a node",
		Long: `taint adds taints (NoSchedule, PreferNoSchedule, NoExecute) to a node, or
removes them, with kubectl's forms: KEY=VALUE:EFFECT or KEY:EFFECT adds;
KEY=VALUE:EFFECT-, KEY:EFFECT- removes the taint with that key and effect
(the value is not compared); KEY- removes every effect of KEY. Removing a
taint the node does not have is an error ("taint ... not found") and
changes nothing. Adding a taint whose key and effect the node has already
needs --overwrite. A NoExecute taint stops the daemons that do not tolerate
it.`,
		Example: "  edgesetctl taint node gw-0042 maintenance=true:NoExecute\n  edgesetctl taint node gw-0042 maintenance=true:NoExecute-\n  edgesetctl taint node gw-0042 maintenance-",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rest, err := nodeNameArg(args)
			if err != nil {
				return err
			}
			add, remove, err := parseTaintArgs(rest)
			if err != nil {
				return err
			}
			return taintNode(cmd, s, name, add, remove, overwrite)
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "allow replacing a taint with the same key and effect")
	return cmd
}

// parseTaintArgs parses kubectl taint's arguments: a trailing '-' removes.
// A taint to add needs an effect; one key and effect is added once.
func parseTaintArgs(args []string) (add, remove []schema.Taint, err error) {
	if len(args) == 0 {
		return nil, nil, usageError{errors.New("no taints given: want KEY[=VALUE]:EFFECT, KEY[=VALUE]:EFFECT- or KEY-")}
	}
	seen := map[string]bool{}
	for _, a := range args {
		if spec, ok := strings.CutSuffix(a, "-"); ok {
			t, err := parseTaint(spec)
			if err != nil {
				return nil, nil, usageError{err}
			}
			remove = append(remove, schema.Taint{Key: t.Key, Effect: t.Effect})
			continue
		}
		t, err := parseTaint(a)
		if err != nil {
			return nil, nil, usageError{err}
		}
		if t.Effect == "" {
			return nil, nil, usageError{fmt.Errorf("invalid taint spec: %v", a)}
		}
		if ref := registry.TaintRef(t); seen[ref] {
			return nil, nil, usageError{fmt.Errorf("duplicated taints with the same key and effect: %s", taintSpec(t))}
		} else {
			seen[ref] = true
		}
		add = append(add, t)
	}
	return add, remove, nil
}

// parseTaint parses KEY=VALUE:EFFECT, KEY:EFFECT or KEY, with kubectl's
// messages.
func parseTaint(spec string) (schema.Taint, error) {
	var t schema.Taint
	parts := strings.Split(spec, ":")
	switch len(parts) {
	case 1:
		t.Key = parts[0]
	case 2:
		t.Effect = parts[1]
		switch t.Effect {
		case schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute:
		default:
			return t, fmt.Errorf("invalid taint effect: %v, unsupported taint effect", t.Effect)
		}
		kv := strings.Split(parts[0], "=")
		if len(kv) > 2 {
			return t, fmt.Errorf("invalid taint spec: %v", spec)
		}
		t.Key = kv[0]
		if len(kv) == 2 {
			t.Value = kv[1]
			if msg := schema.LabelValueProblem(t.Value); msg != "" {
				return t, fmt.Errorf("invalid taint spec: %v, %s", spec, msg)
			}
		}
	default:
		return t, fmt.Errorf("invalid taint spec: %v", spec)
	}
	if msg := schema.LabelKeyProblem(t.Key); msg != "" {
		return t, fmt.Errorf("invalid taint spec: %v, %s", spec, msg)
	}
	return t, nil
}

// taintSpec writes a taint as kubectl does: KEY=VALUE:EFFECT, KEY:EFFECT,
// KEY=VALUE: or KEY.
func taintSpec(t schema.Taint) string {
	switch {
	case t.Effect == "" && t.Value == "":
		return t.Key
	case t.Effect == "":
		return t.Key + "=" + t.Value + ":"
	case t.Value == "":
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// taintNode checks add and remove against the node's taints as kubectl
// taint does, sends what changes something and prints tainted, untainted,
// modified or unchanged.
func taintNode(cmd *cobra.Command, s *streams, name string, add, remove []schema.Taint, overwrite bool) error {
	c, cfg, err := newAPIClient(cmd)
	if err != nil {
		return err
	}
	node, err := c.GetNode(cmd.Context(), name)
	if err != nil {
		return cfg.explain(err)
	}
	plan, err := planTaints(node, add, remove, overwrite)
	if err != nil {
		return err
	}
	if plan.done == "unchanged" {
		fmt.Fprintf(s.out, "node/%s unchanged\n", name)
		return nil
	}
	if _, err := c.UpdateNode(cmd.Context(), name, plan.patch); err != nil {
		return cfg.explain(err)
	}
	fmt.Fprintf(s.out, "node/%s %s\n", name, plan.done)
	return nil
}

// taintPlan is what a taint command sends and prints.
type taintPlan struct {
	patch api.NodePatch
	done  string // tainted, untainted, modified or unchanged
}

// planTaints decides a taint command over the node's current taints as
// kubectl does: every removal must match a taint (by key and effect, or by
// key), and an addition whose key and effect the node has needs overwrite.
// Unlike kubectl (which says "modified"), an overwrite identical to the
// present taint is reported unchanged and not sent.
func planTaints(node api.Node, add, remove []schema.Taint, overwrite bool) (taintPlan, error) {
	var p taintPlan
	var exists, notFound []string
	added, replaced := false, false
	for _, t := range add {
		i := slices.IndexFunc(node.Taints, func(x schema.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect })
		switch {
		case i >= 0 && !overwrite:
			exists = append(exists, t.Key)
			continue
		case i >= 0 && node.Taints[i].Value == t.Value:
			continue // present as asked
		case i >= 0:
			replaced = true
		}
		added = true
		p.patch.AddTaints = append(p.patch.AddTaints, t)
	}
	if len(exists) > 0 {
		return p, fmt.Errorf("node %s already has %s taint(s) with same effect(s) and --overwrite is false", node.Name, strings.Join(exists, ","))
	}
	for _, t := range remove {
		if !slices.ContainsFunc(node.Taints, func(x schema.Taint) bool { return x.Key == t.Key && (t.Effect == "" || x.Effect == t.Effect) }) {
			notFound = append(notFound, fmt.Sprintf("taint %q not found", taintSpec(t)))
			continue
		}
		ref := t.Key
		if t.Effect != "" {
			ref = registry.TaintRef(t)
		}
		p.patch.RemoveTaints = append(p.patch.RemoveTaints, ref)
	}
	if len(notFound) > 0 {
		return p, errors.New(strings.Join(notFound, "; "))
	}
	deleted := len(p.patch.RemoveTaints) > 0
	switch {
	case (added && deleted) || replaced:
		p.done = "modified"
	case added:
		p.done = "tainted"
	case deleted:
		p.done = "untainted"
	default:
		p.done = "unchanged"
	}
	return p, nil
}

func newCordonCmd(s *streams, cordon bool) *cobra.Command {
	use, short := "cordon NAME", "Mark a node unschedulable: no new daemons, running ones stay"
	if !cordon {
		use, short = "uncordon NAME", "Make a node schedulable again (also ends a drain)"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			_, err = setCordon(cmd.Context(), c, s, args[0], cordon)
			return cfg.explain(err)
		},
	}
}

// setCordon cordons (or uncordons, which also removes drain's taint) a
// node and prints "cordoned", or "already cordoned" when it was, as
// kubectl does. It returns the node as it was before.
func setCordon(ctx context.Context, c *api.Client, s *streams, name string, cordon bool) (api.Node, error) {
	node, err := c.GetNode(ctx, name)
	if err != nil {
		return node, err
	}
	drainTainted := slices.ContainsFunc(node.Taints, func(t schema.Taint) bool { return registry.TaintRef(t) == drainTaintRef })
	done := map[bool]string{true: "cordoned", false: "uncordoned"}[cordon]
	if node.Unschedulable == cordon && (cordon || !drainTainted) {
		fmt.Fprintf(s.out, "node/%s already %s\n", name, done)
		return node, nil
	}
	patch := api.NodePatch{Unschedulable: &cordon}
	if !cordon && drainTainted {
		patch.RemoveTaints = []string{drainTaintRef}
	}
	if _, err := c.UpdateNode(ctx, name, patch); err != nil {
		return node, err
	}
	fmt.Fprintf(s.out, "node/%s %s\n", name, done)
	return node, nil
}

// drainTaintRef is the taint drain adds, "key:effect".
const drainTaintRef = schema.TaintNodeUnschedulable + ":" + schema.TaintNoExecute

func newDrainCmd(s *streams) *cobra.Command {
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "drain NAME",
		Short: "Cordon a node and stop the daemons that do not tolerate it being unschedulable",
		Long: `drain means, on an edge device: cordon the node, and add the taint
node.kubernetes.io/unschedulable:NoExecute, so every daemon that does not
tolerate that taint is stopped. Daemons that must keep running during
maintenance (log shippers, VPN agents) add a toleration for it.
uncordon undoes both.

As kubectl drain does, it then waits until the node reports the evicted
instances stopped (its agent acted on the desired state without them),
for at most --timeout (default 0: no limit). A node that is offline
stops them when it reconnects: drain says so and waits; interrupt it or
give --timeout, the drain stays in effect either way.`,
		Example: "  edgesetctl drain gw-0042\n  edgesetctl drain gw-0042 --timeout 5m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return usageError{fmt.Errorf("--timeout must be >= 0, not %s", timeout)}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			return cfg.explain(drain(cmd.Context(), c, s, args[0], timeout, interval))
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for the evicted instances to stop (0: no limit)")
	cmd.Flags().DurationVar(&interval, "interval", 500*time.Millisecond, "how often to poll the controller")
	_ = cmd.Flags().MarkHidden("interval")
	return cmd
}

// drain cordons name, taints it unschedulable:NoExecute and waits until
// the instances it evicts are reported stopped.
func drain(ctx context.Context, c *api.Client, s *streams, name string, timeout, interval time.Duration) error {
	before, err := setCordon(ctx, c, s, name, true)
	if err != nil {
		return err
	}
	patch := api.NodePatch{AddTaints: []schema.Taint{{Key: schema.TaintNodeUnschedulable, Effect: schema.TaintNoExecute}}}
	if !slices.ContainsFunc(before.Taints, func(t schema.Taint) bool { return registry.TaintRef(t) == drainTaintRef }) {
		if _, err := c.UpdateNode(ctx, name, patch); err != nil {
			return err
		}
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, timeout, "node "+name+"'s evicted instances to stop")
		defer cancel()
	}
	// What ran there before the drain: the desired instances, and what
	// placement ran, which the desired state may not hold yet (a drain
	// right after an uncordon).
	evicting := map[string]bool{}
	for _, in := range before.Instances {
		evicting[in.DaemonSet] = true
	}
	for _, p := range before.Placement {
		if p.Run || p.KeepRunning {
			evicting[p.DaemonSet] = true
		}
	}
	// Announced before the first poll, which may already find them
	// stopped: the agent can act on the drain before the poll.
	for _, ds := range slices.Sorted(maps.Keys(evicting)) {
		fmt.Fprintf(s.out, "evicting instance %s\n", ds)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	offlineNoted := false
	var pending []string
	stillRunning := func() error {
		return fmt.Errorf("%w; still running on node %s: %s (the drain stays in effect)", context.Cause(ctx), name, strings.Join(pending, ", "))
	}
	for {
		node, err := c.GetNode(ctx, name)
		if err != nil && pending != nil && ctx.Err() != nil {
			return stillRunning() // the timeout passed during the poll
		}
		if err != nil {
			return err
		}
		pending = evictionPending(node, evicting)
		if len(pending) == 0 {
			for _, ds := range slices.Sorted(maps.Keys(evicting)) {
				fmt.Fprintf(s.out, "instance %s evicted\n", ds)
			}
			fmt.Fprintf(s.out, "node/%s drained\n", name)
			return nil
		}
		if !node.Online && !offlineNoted {
			fmt.Fprintf(s.err, "node %s is offline%s: its instances stop when it reconnects; waiting (the drain stays in effect if you stop waiting)\n", name, lastSeen(node.LastSeen, s.now()))
			offlineNoted = true
		}
		select {
		case <-ctx.Done():
			return stillRunning()
		case <-tick.C:
		}
	}
}

// evictionPending narrows evicting (daemonsets with an instance on the node
// before the drain) to the ones placement now stops, and returns those not
// yet reported stopped: still in the node's desired state, or desired
// without them but not yet acted on by the agent (observed generation
// behind the desired one).
func evictionPending(node api.Node, evicting map[string]bool) []string {
	for _, p := range node.Placement {
		if p.Run || p.KeepRunning {
			delete(evicting, p.DaemonSet)
		}
	}
	var pending []string
	for _, in := range node.Instances {
		if evicting[in.DaemonSet] {
			pending = append(pending, in.DaemonSet)
		}
	}
	if len(pending) == 0 && len(evicting) > 0 && node.ObservedGeneration < node.DesiredGeneration {
		pending = slices.Sorted(maps.Keys(evicting))
	}
	return pending
}

// lastSeen says when a node was last seen and how long before now, for
// messages.
func lastSeen(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return " (never seen)"
	}
	return fmt.Sprintf(" (last seen %s, %s ago)", t.UTC().Format(time.RFC3339), now.Sub(*t).Round(time.Second))
}
