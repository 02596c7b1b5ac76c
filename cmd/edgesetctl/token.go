package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/schema"
)

func newTokenCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint and revoke MQTT credentials of nodes",
		Long: `A node authenticates to the broker as itself: username = node name,
password = a token derived from the fleet secret (DATA_DIR/fleet.secret) and
the node name. These commands run on the controller's machine and read the
secret directly; nothing is stored per node.`,
	}
	var dataDir string
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "./data", "the controller's data directory (holds fleet.secret)")
	cmd.AddCommand(newTokenCreateCmd(s, &dataDir), newTokenRevokeCmd(s, &dataDir))
	return cmd
}

func newTokenCreateCmd(s *streams, dataDir *string) *cobra.Command {
	var controller bool
	cmd := &cobra.Command{
		Use:   "create NODE",
		Short: "Print the MQTT token of a node (alone on the last line)",
		Example: `  edgesetctl token create gw-0042 --data-dir /var/lib/edgeset
  edgeset-agent --node-name gw-0042 --token "$(edgesetctl token create gw-0042 | tail -1)"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if controller {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			secret, err := broker.LoadOrCreateFleetSecret(*dataDir)
			if err != nil {
				return err
			}
			if controller {
				fmt.Fprintf(s.err, "controller credential (username %s), from %s:\n", broker.ControllerUsername, filepath.Join(*dataDir, broker.SecretFile))
				fmt.Fprintln(s.out, broker.ControllerToken(secret))
				return nil
			}
			node := args[0]
			if !schema.ValidNodeName(node) {
				return usageError{fmt.Errorf("%q is not a valid node name (lowercase letters, digits, '-' and '.', at most 253 characters)", node)}
			}
			fmt.Fprintf(s.out, "MQTT credential of node %s (username %s), fingerprint %s:\n", node, node, broker.TokenFingerprint(broker.NodeToken(secret, node)))
			fmt.Fprintln(s.out, broker.NodeToken(secret, node))
			return nil
		},
	}
	cmd.Flags().BoolVar(&controller, "controller", false, "print the controller's own credential (for an external broker's password file)")
	return cmd
}

func newTokenRevokeCmd(s *streams, dataDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NODE|FINGERPRINT",
		Short: "Refuse a node's token from now on (the broker reloads the list within seconds)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := broker.Revoke(*dataDir, args[0]); err != nil {
				if errors.Is(err, broker.ErrInvalidRevocation) {
					return usageError{err}
				}
				return err
			}
			fmt.Fprintf(s.out, "revoked %s (in %s)\n", args[0], filepath.Join(*dataDir, broker.RevokedFile))
			return nil
		},
	}
}
