package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// Update locks in edgesetctl: `rollout resume --force [--node N]`, and
// the notes rollout status, describe and get instances show.

// newRolloutResumeCmd is `rollout resume`, which with --force also
// overrides the stale update locks (of --node alone).
func newRolloutResumeCmd(s *streams, namespace *string) *cobra.Command {
	var force bool
	var node string
	cmd := &cobra.Command{
		Use:   "resume daemonset NAME [--force [--node NODE]]",
		Short: "Resume a paused rollout (also after a failure pause); --force overrides stale update locks",
		Long: `resume releases a paused rollout. With --force it also overrides the update
locks its rollout reports stale (held longer than
spec.rollout.updateLockStaleAfterSeconds): those nodes are updated under the
budget as if their locks were free, and their agents break the locks. --node
overrides one node's stale lock only (an error if it has none). A lock that is
not stale cannot be overridden.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: onDaemonSet(namespace, func(cmd *cobra.Command, c *api.Client, key string) error {
			if node != "" && !force {
				return usageError{fmt.Errorf("--node selects the lock --force overrides: give --force too")}
			}
			if !force {
				if _, err := c.Rollout(cmd.Context(), key, api.RolloutRequest{Action: api.RolloutResume}); err != nil {
					return err
				}
				fmt.Fprintf(s.out, "daemonset/%s resumed\n", key)
				return nil
			}
			ds, err := c.ForceRollout(cmd.Context(), key, node)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.out, "daemonset/%s resumed; %s\n", key, overriddenNote(ds.Instances, node))
			return nil
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "also override the stale update locks")
	cmd.Flags().StringVar(&node, "node", "", "with --force: override this node's stale update lock only")
	return cmd
}

// overriddenNote says which nodes' locks are overridden.
func overriddenNote(ins []api.Instance, only string) string {
	var nodes []string
	for _, in := range ins {
		if l := in.UpdateLock; l != nil && l.Overridden && (only == "" || in.Node == only) {
			nodes = append(nodes, fmt.Sprintf("%s (held since %s)", in.Node, l.HeldSince.UTC().Format(time.RFC3339)))
		}
	}
	if len(nodes) == 0 {
		return "no stale update lock to override"
	}
	return "update locks overridden on " + strings.Join(nodes, ", ")
}

// lockNote is what an instance's message says of its update lock: empty
// when none is held.
func lockNote(l *api.UpdateLock) string {
	if l == nil {
		return ""
	}
	s := "held by update lock since " + l.HeldSince.UTC().Format(time.RFC3339)
	var tags []string
	if l.Deferred {
		tags = append(tags, "update deferred")
	}
	if l.Stale {
		tags = append(tags, "stale")
	}
	if l.Overridden {
		tags = append(tags, "overridden")
	}
	if len(tags) > 0 {
		s += " (" + strings.Join(tags, ", ") + ")"
	}
	return s
}

// instanceMessage is an instance's message with its lock's note first.
func instanceMessage(in api.Instance) string {
	note := lockNote(in.UpdateLock)
	switch {
	case note == "":
		return in.Message
	case in.Message == "":
		return note
	}
	return note + "; " + in.Message
}

// heldNote says how many nodes their update lock holds, which (the first
// few, with since when), how many are stale and how to override them;
// empty when none is held.
func heldNote(ds api.DaemonSet) string {
	r := ds.Status.Rollout
	if r == nil || r.HeldByLock == 0 && r.StaleLocks == 0 {
		return ""
	}
	var s string
	if r.HeldByLock > 0 {
		s = fmt.Sprintf("; %d held by an update lock", r.HeldByLock)
		if held := heldNodes(ds.Instances, 3); held != "" {
			s += " (" + held + ")"
		}
		s += ","
	} else {
		s = ";" // stale locks of nodes held by something else too (a closed window)
	}
	if r.StaleLocks > 0 {
		s += fmt.Sprintf(" %d stale: `edgesetctl rollout resume ds %s -n %s --force` overrides them", r.StaleLocks, ds.Name, ds.Namespace)
	}
	return strings.TrimSuffix(s, ",")
}

// heldNodes lists up to limit nodes whose instance reports a held lock,
// with since when, and how many more there are.
func heldNodes(ins []api.Instance, limit int) string {
	var parts []string
	more := 0
	seen := map[string]bool{}
	for _, in := range ins {
		if in.UpdateLock == nil || in.UpdateLock.Overridden || seen[in.Node] {
			continue
		}
		seen[in.Node] = true
		if len(parts) == limit {
			more++
			continue
		}
		p := in.Node + " since " + in.UpdateLock.HeldSince.UTC().Format(time.RFC3339)
		if in.UpdateLock.Stale {
			p += ", stale"
		}
		parts = append(parts, p)
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	return strings.Join(parts, "; ")
}

// updateLockField describes a daemonset's update lock for describe: empty
// when its template does not opt in.
func updateLockField(spec schema.DaemonSetSpec) string {
	if !spec.Template.UpdateLockEnabled() {
		return ""
	}
	stale := schema.DefaultUpdateLockStaleAfter
	if r := spec.Rollout; r != nil && r.UpdateLockStaleAfterSeconds != nil {
		stale = time.Duration(*r.UpdateLockStaleAfterSeconds) * time.Second
	}
	s := "held while " + schema.UpdateLockFile + " exists; "
	if stale <= 0 {
		return s + "never stale"
	}
	return s + "stale after " + stale.String()
}
