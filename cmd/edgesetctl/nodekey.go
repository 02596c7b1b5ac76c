package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// newNodeKeyCmd is node key: the X25519 key a node's Secrets are sealed
// to (docs/security.md, "Secrets only their device can read").
func newNodeKeyCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "The key a node's Secrets are sealed to: node key get|set|rm NODE",
		Long: `A node's Secrets travel sealed to its own X25519 key, made on the device.
The agent registers it at enrollment or when it starts (controller-url); a
node without one is sent no Secret. set registers a key an admin read off
the device (edgeset-agent key show); rm forgets a node's key, so that a
device that lost its own (reimaged) can register a new one without proving
the old.`,
	}
	run := func(use, short string, nargs int, do func(cmd *cobra.Command, c *api.Client, args []string) error) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: cobra.ExactArgs(nargs),
			RunE: func(cmd *cobra.Command, args []string) error {
				if !schema.ValidNodeName(args[0]) {
					return usageError{fmt.Errorf("%q is not a valid node name (lowercase letters, digits, '-' and '.', at most 253 characters)", args[0])}
				}
				c, cfg, err := newAPIClient(cmd)
				if err != nil {
					return err
				}
				return cfg.explain(do(cmd, c, args))
			},
		}
	}
	show := func(k api.NodeKey) {
		fmt.Fprintf(s.out, "node %s: key ID %s, registered %s (%s)\n%s\n", k.Node, k.KeyID,
			k.RegisteredAt.UTC().Format(time.RFC3339), k.Source, k.PublicKey)
	}
	cmd.AddCommand(
		run("get NODE", "Show the key a node's Secrets are sealed to", 1, func(cmd *cobra.Command, c *api.Client, args []string) error {
			k, err := c.GetNodeKey(cmd.Context(), args[0])
			if err == nil {
				show(k)
			}
			return err
		}),
		run("set NODE KEY", "Register KEY (x25519:..., from edgeset-agent key show) as the node's key (admin)", 2,
			func(cmd *cobra.Command, c *api.Client, args []string) error {
				k, err := c.SetNodeKey(cmd.Context(), args[0], args[1])
				if err == nil {
					show(k)
				}
				return err
			}),
		run("rm NODE", "Forget the node's key: its Secrets are withheld until it registers one (admin)", 1,
			func(cmd *cobra.Command, c *api.Client, args []string) error {
				err := c.DeleteNodeKey(cmd.Context(), args[0])
				if err == nil {
					fmt.Fprintf(s.out, "forgot the key of node %s\n", args[0])
				}
				return err
			}),
	)
	return cmd
}
