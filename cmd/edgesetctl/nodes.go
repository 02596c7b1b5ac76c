package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// patchNode sends a node patch and prints what was done.
func patchNode(cmd *cobra.Command, s *streams, name string, patch api.NodePatch, done string) error {
	c, cfg, err := newAPIClient(cmd)
	if err != nil {
		return err
	}
	if _, err := c.UpdateNode(cmd.Context(), name, patch); err != nil {
		return cfg.explain(err)
	}
	fmt.Fprintf(s.out, "node/%s %s\n", name, done)
	return nil
}

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
	return &cobra.Command{
		Use:   "label node NAME KEY=VALUE... KEY-...",
		Short: "Set (k=v) or remove (k-) labels of a node, over what it announces",
		Long: `label sets operator labels on a node. They win over the labels the agent
announces and survive its re-announcements; k- removes a label (also an
announced one).`,
		Example: "  edgesetctl label node gw-0042 site=berlin tier-",
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
			return patchNode(cmd, s, name, patch, "labeled")
		},
	}
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
	return &cobra.Command{
		Use:   "taint node NAME KEY[=VALUE]:EFFECT... KEY[:EFFECT]-...",
		Short: "Add or remove taints of a node",
		Long: `taint adds taints (NoSchedule, PreferNoSchedule, NoExecute) to a node, or
removes them with a trailing '-' (KEY:EFFECT- or KEY- for every effect).
A NoExecute taint stops the daemons that do not tolerate it.`,
		Example: "  edgesetctl taint node gw-0042 maintenance=true:NoExecute\n  edgesetctl taint node gw-0042 maintenance-",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rest, err := nodeNameArg(args)
			if err != nil {
				return err
			}
			patch, err := parseTaintArgs(rest)
			if err != nil {
				return err
			}
			return patchNode(cmd, s, name, patch, "tainted")
		},
	}
}

func parseTaintArgs(args []string) (api.NodePatch, error) {
	var p api.NodePatch
	if len(args) == 0 {
		return p, usageError{errors.New("no taints given: want KEY[=VALUE]:EFFECT or KEY[:EFFECT]-")}
	}
	for _, a := range args {
		if ref, ok := strings.CutSuffix(a, "-"); ok {
			p.RemoveTaints = append(p.RemoveTaints, ref)
			continue
		}
		kv, effect, ok := strings.Cut(a, ":")
		if !ok {
			return p, usageError{fmt.Errorf("taint %q: want KEY[=VALUE]:EFFECT", a)}
		}
		k, v, _ := strings.Cut(kv, "=")
		p.AddTaints = append(p.AddTaints, schema.Taint{Key: k, Value: v, Effect: effect})
	}
	return p, nil
}

func newCordonCmd(s *streams, cordon bool) *cobra.Command {
	use, short, done := "cordon NAME", "Mark a node unschedulable: no new daemons, running ones stay", "cordoned"
	if !cordon {
		use, short, done = "uncordon NAME", "Make a node schedulable again (also ends a drain)", "uncordoned"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch := api.NodePatch{Unschedulable: &cordon}
			if !cordon {
				patch.RemoveTaints = []string{drainTaintRef}
			}
			return patchNode(cmd, s, args[0], patch, done)
		},
	}
}

// drainTaintRef is the taint drain adds, "key:effect".
const drainTaintRef = schema.TaintNodeUnschedulable + ":" + schema.TaintNoExecute

func newDrainCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "drain NAME",
		Short: "Cordon a node and stop the daemons that do not tolerate it being unschedulable",
		Long: `drain means, on an edge device: cordon the node, and add the taint
node.kubernetes.io/unschedulable:NoExecute, so every daemon that does not
tolerate that taint is stopped. Daemons that must keep running during
maintenance (log shippers, VPN agents) add a toleration for it.
uncordon undoes both.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			yes := true
			patch := api.NodePatch{Unschedulable: &yes,
				AddTaints: []schema.Taint{{Key: schema.TaintNodeUnschedulable, Effect: schema.TaintNoExecute}}}
			return patchNode(cmd, s, args[0], patch, "drained")
		},
	}
}
