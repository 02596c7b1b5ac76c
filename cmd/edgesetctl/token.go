package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// defaultDataDir is the controller data directory revoke uses without
// --data-dir (what `make run` uses).
const defaultDataDir = "./data"

func newTokenCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint, rotate, revoke and re-admit MQTT credentials of nodes",
		Long: `A node authenticates to the broker as itself: username = node name,
password = a token derived from the controller's fleet secret
(DATA_DIR/fleet.secret), the node name and the node's credential epoch.

token rotate moves a node to its next epoch: its old token is refused from
then on and the new one is printed alone on the last line. token readmit
lifts a node's revocation with a new epoch, so the token it had when revoked
stays refused. Both ask the controller (an admin user), which keeps the
epochs in its store and records an event on the node.

token create asks the controller through its API (an admin user's token),
so the token is always one its broker accepts, and the
controller records the mint as an event on the node (who asked, the
token's fingerprint; never the token). With --data-dir DIR it works offline
on the controller's machine instead, reading DIR/fleet.secret; it never
creates a fleet secret, so a wrong DIR is an error, not a token the broker
refuses. token revoke works on the data directory (--data-dir, default
./data).`,
	}
	var dataDir string
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "", "the controller's data directory (holds fleet.secret): create works offline from it; revoke's default ./data")
	cmd.AddCommand(newTokenCreateCmd(s, &dataDir), newTokenRevokeCmd(s, &dataDir),
		newTokenEpochCmd(s, "rotate", "Give a node a new MQTT token (a new credential epoch); its old token is refused from now on",
			func(cmd *cobra.Command, c *api.Client, node string) (api.NodeToken, error) {
				return c.RotateNodeToken(cmd.Context(), node)
			}),
		newTokenEpochCmd(s, "readmit", "Admit a revoked node again, with a new MQTT token (the revoked one stays refused)",
			func(cmd *cobra.Command, c *api.Client, node string) (api.NodeToken, error) {
				return c.ReadmitNode(cmd.Context(), node)
			}))
	return cmd
}

func newTokenCreateCmd(s *streams, dataDir *string) *cobra.Command {
	var controller bool
	cmd := &cobra.Command{
		Use:   "create NODE",
		Short: "Print the MQTT token of a node (alone on the last line)",
		Example: `  edgesetctl token create gw-0042
  edgeset-agent --node-name gw-0042 --token "$(edgesetctl token create gw-0042 | tail -1)"
  edgesetctl token create gw-0042 --data-dir /var/lib/edgeset   # offline, on the controller's machine
  edgesetctl token create --controller --data-dir /var/lib/edgeset`,
		Args: func(cmd *cobra.Command, args []string) error {
			if controller {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if controller {
				if *dataDir == "" {
					return usageError{errors.New("--controller reads the fleet secret directly: give --data-dir DIR (the controller's data directory)")}
				}
				secret, err := loadFleetSecret(*dataDir)
				if err != nil {
					return err
				}
				fmt.Fprintf(s.err, "controller credential (username %s), from %s:\n", credential.ControllerUsername, filepath.Join(*dataDir, credential.SecretFile))
				fmt.Fprintln(s.out, credential.ControllerToken(secret))
				return nil
			}
			node := args[0]
			if !schema.ValidNodeName(node) {
				return usageError{fmt.Errorf("%q is not a valid node name (lowercase letters, digits, '-' and '.', at most 253 characters)", node)}
			}
			if *dataDir != "" {
				return createTokenOffline(s, *dataDir, node)
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			tok, err := c.MintNodeToken(cmd.Context(), node)
			if err != nil {
				return cfg.explain(fmt.Errorf("mint the token of node %s: %w", node, err))
			}
			fmt.Fprintf(s.out, "MQTT credential of node %s (username %s), fingerprint %s, from the controller at %s:\n", tok.Node, tok.Username, tok.Fingerprint, cfg.Server)
			fmt.Fprintln(s.out, tok.Token)
			return nil
		},
	}
	cmd.Flags().BoolVar(&controller, "controller", false, "print the controller's own credential (for an external broker's password file; needs --data-dir)")
	return cmd
}

// createTokenOffline prints node's token derived from dataDir's fleet
// secret.
func createTokenOffline(s *streams, dataDir, node string) error {
	secret, err := loadFleetSecret(dataDir)
	if err != nil {
		return err
	}
	switch revoked, err := credential.Revoked(dataDir, secret, node); {
	case err != nil:
		return err
	case revoked:
		return fmt.Errorf("node %s is revoked (listed in %s): its token would be refused by the broker; remove the entry to admit the node again",
			node, filepath.Join(dataDir, credential.RevokedFile))
	}
	epochs, err := credential.ReadEpochs(dataDir)
	if err != nil {
		return err
	}
	token := credential.NodeTokenAt(secret, node, epochs[node])
	fmt.Fprintf(s.out, "MQTT credential of node %s (username %s), fingerprint %s, from %s:\n", node, node, credential.TokenFingerprint(token), filepath.Join(dataDir, credential.SecretFile))
	fmt.Fprintln(s.out, token)
	return nil
}

// loadFleetSecret reads dataDir's fleet secret, which must exist: a token
// from a secret edgesetctl made up would be refused by the broker.
func loadFleetSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, credential.SecretFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no fleet secret at %s: --data-dir must be the controller's data directory (edgesetctl never creates one; without --data-dir, token create asks the controller)", path)
	}
	return credential.LoadOrCreateFleetSecret(dataDir)
}

func newTokenRevokeCmd(s *streams, dataDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NODE|FINGERPRINT",
		Short: "Refuse a node's token from now on (the broker reloads the list within seconds)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := *dataDir
			if dir == "" {
				dir = defaultDataDir
			}
			if _, err := loadFleetSecret(dir); err != nil {
				return err
			}
			if err := credential.Revoke(dir, args[0]); err != nil {
				if errors.Is(err, credential.ErrInvalidRevocation) {
					return usageError{err}
				}
				return err
			}
			fmt.Fprintf(s.out, "revoked %s (in %s)\n", args[0], filepath.Join(dir, credential.RevokedFile))
			return nil
		},
	}
}

// newTokenEpochCmd is token rotate and token readmit: both ask the
// controller (admin) to move the node to a new credential epoch and
// print its new token alone on the last line.
func newTokenEpochCmd(s *streams, verb, short string, call func(*cobra.Command, *api.Client, string) (api.NodeToken, error)) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " NODE",
		Short:   short,
		Example: "  edgeset-agent --node-name gw-0042 --token \"$(edgesetctl token " + verb + " gw-0042 | tail -1)\"",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			if !schema.ValidNodeName(node) {
				return usageError{fmt.Errorf("%q is not a valid node name (lowercase letters, digits, '-' and '.', at most 253 characters)", node)}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			tok, err := call(cmd, c, node)
			if err != nil {
				return cfg.explain(fmt.Errorf("%s the token of node %s: %w", verb, node, err))
			}
			fmt.Fprintf(s.out, "new MQTT credential of node %s (username %s, epoch %d), fingerprint %s; the old token is refused from now on:\n",
				tok.Node, tok.Username, tok.Epoch, tok.Fingerprint)
			fmt.Fprintln(s.out, tok.Token)
			return nil
		},
	}
}

// newNodeCmd groups the per-node credential verbs under node, as issue
// 18 names them: node token rotate NODE, node readmit NODE (the same
// commands as token rotate and token readmit).
func newNodeCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "A node's credential: node token rotate NODE, node readmit NODE, node key get|set|rm NODE",
	}
	tok := &cobra.Command{Use: "token", Short: "A node's MQTT token"}
	tok.AddCommand(newTokenEpochCmd(s, "rotate", "Give a node a new MQTT token (a new credential epoch); its old token is refused from now on",
		func(cmd *cobra.Command, c *api.Client, node string) (api.NodeToken, error) {
			return c.RotateNodeToken(cmd.Context(), node)
		}))
	cmd.AddCommand(tok, newNodeKeyCmd(s), newTokenEpochCmd(s, "readmit", "Admit a revoked node again, with a new MQTT token (the revoked one stays refused)",
		func(cmd *cobra.Command, c *api.Client, node string) (api.NodeToken, error) {
			return c.ReadmitNode(cmd.Context(), node)
		}))
	return cmd
}
