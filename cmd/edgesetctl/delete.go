package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/schema"
)

func newDeleteCmd(s *streams) *cobra.Command {
	var namespace, node string
	var orphan bool
	cmd := &cobra.Command{
		Use:   "delete (daemonset|configmap|secret|node|instance) NAME",
		Short: "Delete a daemonset, configmap or secret, or forget a node",
		Long: `Deleting a daemonset removes its instances from every node; nodes that are
offline remove them when they return. With --cascade=orphan the instances
keep running, unmanaged.

Deleting a node clears its desired state, so its agent (if reachable) stops
every edgeset daemon, then forgets the node and its overrides. An agent that
announces itself again comes back as a new node.

Deleting an instance (instance DAEMONSET --node NODE) removes one node's
instance of a daemonset: under OnDelete the node then moves to the current
revision, as deleting a pod does in Kubernetes.

Deleting a configmap or secret that daemonsets reference is allowed, as in
Kubernetes: their instances wait in CreateContainerConfigError until it is
applied again, unless the reference is optional.`,
		Example: `  edgesetctl delete daemonset fluentd -n logging
  edgesetctl delete cm agent-config -n edge
  edgesetctl delete node gw-0042
  edgesetctl delete instance fluentd --node gw-0042 -n logging`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, _, err := resourceKind(args[0])
			if err != nil {
				return err
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			name := args[1]
			switch kind {
			case kindDaemonSet:
				key := namespace + "/" + name
				if err := c.DeleteDaemonSet(cmd.Context(), key, orphan); err != nil {
					return cfg.explain(err)
				}
				fmt.Fprintf(s.out, "daemonset/%s deleted\n", key)
			case kindConfigMap, kindSecret:
				if err := deleteConfig(cmd.Context(), c, s.out, kind, namespace+"/"+name); err != nil {
					return cfg.explain(err)
				}
			case kindNode:
				if err := c.DeleteNode(cmd.Context(), name); err != nil {
					return cfg.explain(err)
				}
				fmt.Fprintf(s.out, "node/%s deleted\n", name)
			default:
				if node == "" {
					return usageError{fmt.Errorf("delete instance needs --node NODE")}
				}
				key := namespace + "/" + name
				if err := c.DeleteInstance(cmd.Context(), key, node); err != nil {
					return cfg.explain(err)
				}
				fmt.Fprintf(s.out, "instance of daemonset/%s on node %s deleted\n", key, node)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset, configmap or secret")
	cmd.Flags().StringVar(&node, "node", "", "node of the instance to delete (delete instance)")
	cmd.Flags().Var(newCascadeValue(&orphan), "cascade", "background (remove instances) or orphan (leave them running)")
	return cmd
}

// cascadeValue parses --cascade=background|orphan.
type cascadeValue struct{ orphan *bool }

func newCascadeValue(orphan *bool) *cascadeValue { return &cascadeValue{orphan} }

func (v *cascadeValue) String() string {
	if v.orphan != nil && *v.orphan {
		return "orphan"
	}
	return "background"
}

func (v *cascadeValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "background", "foreground", "true":
		*v.orphan = false
	case "orphan", "false":
		*v.orphan = true
	default:
		return fmt.Errorf("%q: want background or orphan", s)
	}
	return nil
}

func (v *cascadeValue) Type() string { return "string" }
