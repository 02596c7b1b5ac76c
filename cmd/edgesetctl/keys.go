package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/signing"
)

// Files keys init writes in --out.
const (
	rootKeyFile = "root.key"
	rootPubFile = "root.pub"
)

func newKeysCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the fleet root key and the controller's signing keys",
		Long: `With signing on (controller signing: true, agents with trust-root), a
device runs only what the fleet's keys signed. The fleet root key is made
offline with keys init and never given to the controller: keep root.key
on an offline machine or a hardware token's host. keys delegate signs a
key set (version, online public keys with expiry, revoked key IDs) that
delegates the controller's online key, and uploads it; keys revoke
publishes one without a key and listing it revoked. See docs/security.md.`,
	}
	cmd.AddCommand(newKeysInitCmd(s), newKeysShowCmd(s), newKeysDelegateCmd(s), newKeysRevokeCmd(s))
	return cmd
}

func newKeysInitCmd(s *streams) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "init --out DIR",
		Short: "Create the fleet root key pair (offline); prints its key ID and public key (alone on the last line)",
		Example: `  edgesetctl keys init --out /media/offline/edgeset-root
  edgeset-agent --trust-root "$(edgesetctl keys init --out ./root | tail -1)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("--out DIR is required: where root.key (mode 0600) and root.pub are written")}
			}
			priv, err := signing.GenerateKey()
			if err != nil {
				return err
			}
			pub, _ := priv.Public().(ed25519.PublicKey)
			keyPath, pubPath := filepath.Join(out, rootKeyFile), filepath.Join(out, rootPubFile)
			if err := signing.WritePrivateKeyFile(keyPath, priv); err != nil {
				return err
			}
			if err := signing.WritePublicKeyFile(pubPath, pub); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "fleet root key %s: private key %s (keep it offline), public key %s\n", signing.KeyID(pub), keyPath, pubPath)
			fmt.Fprintln(s.out, signing.FormatPublicKey(pub))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write root.key and root.pub to (created; existing files are never overwritten)")
	return cmd
}

func newKeysShowCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Show the controller's online key, its key set and what agents refused",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			st, err := c.Signing(cmd.Context())
			if err != nil {
				return cfg.explain(fmt.Errorf("read the signing state: %w", err))
			}
			printSigning(s, st)
			return nil
		},
	}
}

func printSigning(s *streams, st api.SigningStatus) {
	if !st.Enabled {
		fmt.Fprintln(s.out, "signing: off (the controller publishes unsigned; set signing: true)")
		return
	}
	fmt.Fprintf(s.out, "online key:  %s %s\nvalidity:    %s\n", st.KeyID, st.PublicKey, st.Validity)
	if st.KeySet == nil {
		fmt.Fprintln(s.out, "key set:     none (run edgesetctl keys delegate --root-key FILE; until then agents refuse everything)")
	} else {
		fmt.Fprintf(s.out, "key set:     version %d, issued %s\n", st.KeySet.Version, st.KeySet.IssuedAt.Format(time.RFC3339))
		for _, k := range st.KeySet.Keys {
			mark := ""
			if k.ID == st.KeyID {
				mark = " (this controller)"
			}
			for _, c := range st.Controllers {
				if c.KeyID == k.ID && c.KeyID != st.KeyID {
					mark = " (HA controller " + c.Controller + ")"
				}
			}
			fmt.Fprintf(s.out, "  key %s expires %s%s\n", k.ID, k.Expires.Format(time.RFC3339), mark)
		}
		for _, id := range st.KeySet.Revoked {
			fmt.Fprintf(s.out, "  revoked %s\n", id)
		}
	}
	for _, c := range st.Controllers {
		if !c.Delegated {
			fmt.Fprintf(s.out, "HA controller %s: key %s NOT delegated: agents refuse what it signs if it leads (run keys delegate)\n", c.Controller, c.KeyID)
		}
	}
	for _, r := range st.Refusals {
		fmt.Fprintf(s.out, "node %s refused %d documents, last %s: %s\n", r.Node, r.Total, r.LastReason, r.LastMessage)
	}
}

func newKeysDelegateCmd(s *streams) *cobra.Command {
	var rootKey, expires string
	cmd := &cobra.Command{
		Use:   "delegate --root-key FILE [--expires 90d]",
		Short: "Sign a key set delegating the controller's online key, and upload it",
		Long: `Fetches the controller's online public key and its current key set,
signs with the root key a key set one version higher that lists the
controller's key (expiring after --expires) besides the keys still
delegated, and uploads it. The controller publishes it to every agent.

With HA controllers on etcd, each controller has its own online key; the
leader lists them all, and keys delegate delegates every one of them, so
agents accept what whichever controller leads signs. Run it again after a
controller joins or gets a new key (keys show names any not delegated).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseDays(expires)
			if err != nil {
				return usageError{fmt.Errorf("--expires: %w", err)}
			}
			return updateKeySet(cmd, s, rootKey, func(ks *signing.KeySet, st api.SigningStatus, now time.Time) error {
				keys, err := keysToDelegate(s, ks, st)
				if err != nil {
					return err
				}
				for _, k := range keys {
					ks.Keys = slices.DeleteFunc(ks.Keys, func(o signing.OnlineKey) bool { return o.ID == k.ID || !o.Expires.After(now) })
				}
				for _, k := range keys {
					k.Expires = now.Add(d)
					ks.Keys = append(ks.Keys, k)
				}
				if len(ks.Keys) > signing.MaxKeys {
					return fmt.Errorf("the key set would list %d keys, at most %d: revoke keys no longer used (keys revoke)", len(ks.Keys), signing.MaxKeys)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&rootKey, "root-key", "", "the fleet root's private key file (root.key from keys init)")
	cmd.Flags().StringVar(&expires, "expires", "90d", "how long the delegation lasts: a Go duration or a number of days (90d)")
	return cmd
}

func newKeysRevokeCmd(s *streams) *cobra.Command {
	var rootKey string
	cmd := &cobra.Command{
		Use:   "revoke KEYID --root-key FILE",
		Short: "Sign and upload a key set without KEYID, listing it revoked",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if len(id) != signing.KeyIDLength {
				return usageError{fmt.Errorf("%q is not a key ID (%d hex digits; keys show lists them)", id, signing.KeyIDLength)}
			}
			return updateKeySet(cmd, s, rootKey, func(ks *signing.KeySet, st api.SigningStatus, _ time.Time) error {
				if id == st.KeyID {
					return fmt.Errorf("%s is the controller's own key: agents would refuse everything it signs; rotate it first (docs/security.md)", id)
				}
				ks.Keys = slices.DeleteFunc(ks.Keys, func(k signing.OnlineKey) bool { return k.ID == id })
				if !ks.IsRevoked(id) {
					ks.Revoked = append(ks.Revoked, id)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&rootKey, "root-key", "", "the fleet root's private key file (root.key from keys init)")
	return cmd
}

// keysToDelegate returns the keys keys delegate signs: the answering
// controller's online key, and every HA controller's (st.Controllers),
// each checked against its ID. The answering controller's key revoked is
// an error; another controller's revoked key is left out with a warning.
func keysToDelegate(s *streams, ks *signing.KeySet, st api.SigningStatus) ([]signing.OnlineKey, error) {
	own, err := onlineKey(st.KeyID, st.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("the controller's key: %w", err)
	}
	if ks.IsRevoked(own.ID) {
		return nil, fmt.Errorf("the controller's key %s is revoked: give it a new one first (docs/security.md, rotation)", own.ID)
	}
	keys := []signing.OnlineKey{own}
	for _, c := range st.Controllers {
		k, err := onlineKey(c.KeyID, c.PublicKey)
		switch {
		case err != nil:
			return nil, fmt.Errorf("HA controller %s's key: %w", c.Controller, err)
		case k.ID == own.ID || slices.ContainsFunc(keys, func(o signing.OnlineKey) bool { return o.ID == k.ID }):
			continue
		case ks.IsRevoked(k.ID):
			fmt.Fprintf(s.err, "edgesetctl: not delegating HA controller %s's key %s: it is revoked (give that controller a new key: docs/scale-out.md)\n", c.Controller, k.ID)
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// onlineKey parses a public key the controller reported, checking that
// its ID is the one claimed.
func onlineKey(id, public string) (signing.OnlineKey, error) {
	pub, err := signing.ParsePublicKey(public)
	if err != nil {
		return signing.OnlineKey{}, fmt.Errorf("public key: %w", err)
	}
	if got := signing.KeyID(pub); got != id {
		return signing.OnlineKey{}, fmt.Errorf("the public key has ID %s, not the %s claimed", got, id)
	}
	return signing.OnlineKey{ID: id, PublicKey: pub}, nil
}

// updateKeySet reads the controller's key set, checks it was signed by
// the root, lets change edit the next version, signs it and uploads it.
func updateKeySet(cmd *cobra.Command, s *streams, rootKey string,
	change func(ks *signing.KeySet, st api.SigningStatus, now time.Time) error) error {
	if rootKey == "" {
		return usageError{errors.New("--root-key FILE is required (root.key from keys init)")}
	}
	root, err := signing.ReadPrivateKeyFile(rootKey)
	if err != nil {
		return err
	}
	rootPub, _ := root.Public().(ed25519.PublicKey)
	c, cfg, err := newAPIClient(cmd)
	if err != nil {
		return err
	}
	st, err := c.Signing(cmd.Context())
	if err != nil {
		return cfg.explain(fmt.Errorf("read the signing state: %w", err))
	}
	if !st.Enabled {
		return errors.New("signing is off on the controller: set signing: true and restart it")
	}
	next := signing.KeySet{Version: 1}
	if st.KeySet != nil {
		cur, err := signing.OpenKeySet(rootPub, st.KeySetEnvelope)
		if err != nil {
			return fmt.Errorf("the controller's key set (version %d) is not this root's (%s): %w", st.KeySet.Version, signing.KeyID(rootPub), err)
		}
		next = cur
		next.Version++
	}
	now := time.Now().UTC().Truncate(time.Second)
	next.IssuedAt = now
	if err := change(&next, st, now); err != nil {
		return err
	}
	env, err := signing.SignKeySet(root, next)
	if err != nil {
		return err
	}
	out, err := c.PutKeySet(cmd.Context(), env)
	if err != nil {
		return cfg.explain(fmt.Errorf("upload key set version %d: %w", next.Version, err))
	}
	printSigning(s, out)
	return nil
}

// parseDays parses a Go duration or a whole number of days ("90d").
func parseDays(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q: want a number of days such as 90d, or a duration such as 720h", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want a number of days such as 90d, or a duration such as 720h", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be positive", s)
	}
	return d, nil
}
