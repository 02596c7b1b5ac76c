package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func newLogsCmd(s *streams) *cobra.Command {
	var req api.LogsRequest
	var namespace string
	cmd := &cobra.Command{
		Use:   "logs DAEMONSET --node NODE",
		Short: "Print the log of a daemonset's container on one node",
		Long: `Logs asks a node's agent, over MQTT, for the log of its instance of a
daemonset and prints it: no SSH to the device needed. Without -c it is the
first container of the template.

The node answers with at most 1 MiB of log. With --follow new lines are
streamed until interrupted; the agent ends a follow after 10 minutes.

Docker restarts a container in place and keeps one log for all its runs,
so unlike kubectl logs (the current container only) the log holds every
run; use --tail to see the latest lines. --previous prints the last run
that terminated, as kubectl does: for a running container that was
restarted, the run before the current one; for an exited container, its
last run. A node the controller knows to be offline is reported at once,
with when it was last seen; one that does not answer within 15 seconds is
reported too.`,
		Example: `  edgesetctl logs fluentd --node gw-0042 -n logging
  edgesetctl logs fluentd --node gw-0042 -n logging --tail 100 -f
  edgesetctl logs exporter --node gw-0042 -c sidecar
  edgesetctl logs exporter --node gw-0042 --previous   # why did it crash?`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Node == "" {
				return usageError{errors.New("logs needs --node NODE")}
			}
			if req.Previous && req.Follow {
				return usageError{errors.New("--previous and --follow cannot be combined: a terminated run has no new lines")}
			}
			if req.Tail < 0 {
				return usageError{fmt.Errorf("--tail must be >= 0, not %d", req.Tail)}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			req.DaemonSet = namespace + "/" + args[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return cfg.explain(printLogs(ctx, c, req, s.out))
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset")
	cmd.Flags().StringVar(&req.Node, "node", "", "node whose instance to read (required)")
	cmd.Flags().StringVarP(&req.Container, "container", "c", "", "container of the template (default: the first)")
	cmd.Flags().IntVar(&req.Tail, "tail", 0, "print only the last N lines (0: all)")
	cmd.Flags().BoolVarP(&req.Follow, "follow", "f", false, "stream new lines until interrupted")
	cmd.Flags().BoolVarP(&req.Previous, "previous", "p", false, "print the log of the container's last terminated run")
	return cmd
}

// printLogs copies the log to out; an interruption (ctx ending) is a clean
// end.
func printLogs(ctx context.Context, c *api.Client, req api.LogsRequest, out io.Writer) error {
	rc, err := c.Logs(ctx, req)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(out, rc); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
