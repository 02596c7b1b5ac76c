package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func newRolloutCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout (status|history|undo|pause|resume|restart|promote|retry) daemonset NAME",
		Short: "Follow and steer the rollout of a daemonset",
		Long: `rollout follows a daemonset's update across the fleet and steers it:
status waits for it (exit 0 when complete, 1 on failure or rollback), history
lists revisions, undo makes an earlier template current again, pause and
resume hold and release new batches, restart rolls the same template out
again, promote lets a canary rollout proceed, retry rolls out again the
revision an automatic rollback rejected.`,
	}
	var namespace string
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset")
	cmd.AddCommand(
		newRolloutStatusCmd(s, &namespace),
		newRolloutHistoryCmd(s, &namespace),
		newRolloutUndoCmd(s, &namespace),
		newRolloutActionCmd(s, &namespace, api.RolloutPause, "Stop starting new batches (nodes already updating finish)", "paused"),
		newRolloutResumeCmd(s, &namespace),
		newRolloutActionCmd(s, &namespace, api.RolloutRestart, "Roll the current template out again as a new revision", "restarted"),
		newRolloutActionCmd(s, &namespace, api.RolloutPromote, "Let a canary rollout go on to every node", "promoted"),
		newRolloutActionCmd(s, &namespace, api.RolloutRetry, "Roll out again the revision an automatic rollback rejected", "retried"),
	)
	return cmd
}

// daemonSetArg accepts "daemonset NAME", "ds NAME" or "ds/NAME".
func daemonSetArg(args []string, namespace string) (string, error) {
	kind, name, err := resourceKind(args[0])
	if err != nil {
		return "", err
	}
	if len(args) == 2 {
		name = args[1]
	}
	if kind != kindDaemonSet || name == "" || len(args) > 2 {
		return "", usageError{errors.New("want daemonset NAME (or ds/NAME)")}
	}
	return namespace + "/" + name, nil
}

// onDaemonSet runs fn with the daemonset named by args and a client of the
// controller, explaining a failure to reach it.
func onDaemonSet(namespace *string, fn func(cmd *cobra.Command, c *api.Client, key string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		key, err := daemonSetArg(args, *namespace)
		if err != nil {
			return err
		}
		c, cfg, err := newAPIClient(cmd)
		if err != nil {
			return err
		}
		return cfg.explain(fn(cmd, c, key))
	}
}

func newRolloutActionCmd(s *streams, namespace *string, action, short, done string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " daemonset NAME",
		Short: short,
		Args:  cobra.RangeArgs(1, 2),
		RunE: onDaemonSet(namespace, func(cmd *cobra.Command, c *api.Client, key string) error {
			if _, err := c.Rollout(cmd.Context(), key, api.RolloutRequest{Action: action}); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "daemonset/%s %s\n", key, done)
			return nil
		}),
	}
}

func newRolloutUndoCmd(s *streams, namespace *string) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "undo daemonset NAME [--to-revision N]",
		Short: "Make an earlier revision's template current again (default: the previous one)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: onDaemonSet(namespace, func(cmd *cobra.Command, c *api.Client, key string) error {
			ds, err := c.Rollout(cmd.Context(), key, api.RolloutRequest{Action: api.RolloutUndo, ToRevision: to})
			if err != nil {
				return err
			}
			fmt.Fprintf(s.out, "daemonset/%s rolled back (revision %d)\n", key, ds.CurrentRevision)
			return nil
		}),
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "revision number to roll back to (see rollout history)")
	return cmd
}

func newRolloutHistoryCmd(s *streams, namespace *string) *cobra.Command {
	return &cobra.Command{
		Use:   "history daemonset NAME",
		Short: "List a daemonset's revisions with their change cause",
		Args:  cobra.RangeArgs(1, 2),
		RunE: onDaemonSet(namespace, func(cmd *cobra.Command, c *api.Client, key string) error {
			revs, err := c.RolloutHistory(cmd.Context(), key)
			if err != nil {
				return err
			}
			return printHistory(s.out, revs, s.now())
		}),
	}
}

// printHistory prints a daemonset's revisions, aged at now.
func printHistory(w io.Writer, revs []api.Revision, now time.Time) error {
	t := newTable(w, "REVISION", "CHANGE-CAUSE", "IMAGES", "NODES", "AGE", "")
	for _, r := range revs {
		current := ""
		if r.Current {
			current = "current"
		}
		t.row(strconv.FormatInt(r.Number, 10), orNone(r.ChangeCause), historyImages(r), strconv.Itoa(r.Nodes), age(r.CreatedAt, now), current)
	}
	return t.flush()
}

// historyImages lists a revision's images, each pinned one with the
// (short) manifest digest the revision pins, as image ls shows digests.
func historyImages(r api.Revision) string {
	out := make([]string, len(r.Images))
	for i, im := range r.Images {
		out[i] = im
		if pin, ok := schema.PinOf(r.Pins, im); ok {
			out[i] += " (" + shortDigest(pin.Digest) + ")"
		}
	}
	return strings.Join(out, ",")
}

// errRolloutFailed: the rollout paused on failures or rolled back.
var errRolloutFailed = errors.New("rollout failed")

func newRolloutStatusCmd(s *streams, namespace *string) *cobra.Command {
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "status daemonset NAME",
		Short: "Follow a rollout until it completes (exit 0) or fails or rolls back (exit 1)",
		Long: `status prints the rollout's progress until every reachable node runs the
current revision, available. On a terminal it draws a progress bar, otherwise
it prints a line whenever the progress changes. Nodes that are offline do not
hold the rollout up: they update when they return.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: onDaemonSet(namespace, func(cmd *cobra.Command, c *api.Client, key string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return followRollout(ctx, c, s, key, interval)
		}),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long (exit 1)")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to poll the controller")
	return cmd
}

// progress reports a rollout's progress: a bar on a terminal, lines
// otherwise.
type progress interface {
	update(ds api.DaemonSet)
	done()
}

func newProgress(s *streams, key string) progress {
	if f, ok := s.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barProgress{key: key, out: s.out}
	}
	return &lineProgress{key: key, out: s.out}
}

func followRollout(ctx context.Context, c *api.Client, s *streams, key string, interval time.Duration) error {
	p := newProgress(s, key)
	defer p.done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	notComplete := func() error { return fmt.Errorf("rollout of %s not complete: %w", key, ctx.Err()) }
	for polled := false; ; polled = true {
		ds, err := c.GetDaemonSet(ctx, key)
		if err != nil && polled && ctx.Err() != nil {
			return notComplete() // the timeout passed during the poll
		}
		if err != nil {
			return err
		}
		p.update(ds)
		if finished, err := rolloutOutcome(ds); finished {
			p.done()
			if err == nil {
				fmt.Fprintf(s.out, "daemonset %q successfully rolled out\n", key)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return notComplete()
		case <-tick.C:
		}
	}
}

// rolloutOutcome says whether a rollout is over, and whether it failed.
func rolloutOutcome(ds api.DaemonSet) (bool, error) {
	r := ds.Status.Rollout
	switch {
	case r == nil || r.Target != ds.CurrentHash:
		return false, nil // the controller has not planned the new revision yet
	case r.RolledBack:
		return true, fmt.Errorf("%w: %s", errRolloutFailed, rolledBackMessage(ds))
	case r.Paused && r.Failed > 0:
		return true, fmt.Errorf("%w: paused: %s", errRolloutFailed, r.PauseReason)
	case r.Complete:
		return true, nil
	}
	return false, nil
}

// rolledBackMessage says which revision an automatic rollback rejected,
// why, what runs instead, and how to try the rejected one again.
func rolledBackMessage(ds api.DaemonSet) string {
	r := ds.Status.Rollout
	from, reason := "revision "+shortHash(r.RolledBackFrom), r.RollbackReason
	if rej := ds.Status.RejectedRevision; rej != nil && rej.Hash == r.RolledBackFrom {
		from = fmt.Sprintf("revision %d (%s)", rej.Revision, shortHash(rej.Hash))
		reason = cmp.Or(reason, rej.Reason)
	}
	state := "rolling back"
	if r.Complete {
		state = "rollback complete"
	}
	return fmt.Sprintf("%s was rolled back automatically: %s; revision %d (%s) runs instead (%s); "+
		"`edgesetctl rollout retry daemonset %s -n %s` rolls it out again",
		from, cmp.Or(reason, "reason not recorded"), ds.CurrentRevision, shortHash(ds.CurrentHash), state, ds.Name, ds.Namespace)
}

func progressLine(key string, ds api.DaemonSet) string {
	r := ds.Status.Rollout
	if r == nil {
		return fmt.Sprintf("Waiting for daemonset %q rollout to start...", key)
	}
	line := fmt.Sprintf("Waiting for daemonset %q rollout to finish: %d of %d nodes updated and available (%d updating, %d waiting, %d offline, %d failed)",
		key, r.Updated, r.Total, r.Updating, r.Waiting, r.Offline, r.Failed)
	line += windowNote(*r) + heldNote(ds) + prefetchNote(*r, ds.Instances)
	if r.Paused {
		line += "; paused: " + r.PauseReason
	}
	if r.CanaryWaiting {
		line += "; canary done, waiting for `edgesetctl rollout promote`"
	}
	return line + "..."
}

type lineProgress struct {
	key  string
	out  io.Writer
	last string
}

func (l *lineProgress) update(ds api.DaemonSet) {
	if line := progressLine(l.key, ds); line != l.last {
		fmt.Fprintln(l.out, line)
		l.last = line
	}
}

func (l *lineProgress) done() {}

type barProgress struct {
	key string
	out io.Writer
	bar *progressbar.ProgressBar
}

func (b *barProgress) update(ds api.DaemonSet) {
	r := ds.Status.Rollout
	if r == nil {
		return
	}
	if b.bar == nil {
		b.bar = progressbar.NewOptions(max(r.Total, 1), progressbar.OptionSetWriter(b.out),
			progressbar.OptionSetDescription(b.key), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(false))
	}
	b.bar.ChangeMax(max(r.Total, 1))
	b.bar.Describe(fmt.Sprintf("%s: %d updating, %d waiting, %d offline, %d failed%s%s%s", b.key, r.Updating, r.Waiting, r.Offline, r.Failed,
		windowNote(*r), heldNote(ds), prefetchNote(*r, ds.Instances)))
	_ = b.bar.Set(r.Updated)
}

func (b *barProgress) done() {
	if b.bar != nil {
		_ = b.bar.Finish()
		fmt.Fprintln(b.out)
		b.bar = nil
	}
}
