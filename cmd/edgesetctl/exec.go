package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func newExecCmd(s *streams) *cobra.Command {
	var req api.ExecRequest
	var namespace string
	var stdin bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec DAEMONSET --node NODE [-c CONTAINER] [-i] -- COMMAND [ARG...]",
		Short: "Run a command in a daemonset's container on one node",
		Long: `Exec asks a node's agent, over MQTT, to run a command in its instance of a
daemonset, and prints its output as it comes: stdout to stdout, stderr to
stderr. edgesetctl exits with the command's exit code. The command is an argv
(no shell unless you run one: -- sh -c '...').

With -i, edgesetctl's standard input (at most 64 KiB) is the command's. There
is no terminal (-t): the command cannot be interactive. The session ends
after --timeout (default 60s, at most 1h); the engine cannot stop a command
it started, so one still running then runs on in the container.

The device decides: an agent runs remote commands only with allow-exec set in
its configuration; otherwise the request is refused (403). Output past 4 MiB
is dropped and said so.`,
		Example: `  edgesetctl exec exporter --node gw-0042 -- cat /etc/exporter.yaml
  edgesetctl exec fluentd --node gw-0042 -n logging -c forwarder -- sh -c 'ls -l /var/log'
  printf 'reload\n' | edgesetctl exec modbus-gw --node gw-0042 -i -- /bin/ctl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return usageError{errors.New("exec needs DAEMONSET, then -- and the command (edgesetctl exec DS --node NODE -- CMD ARG...)")}
			}
			if len(args) < 2 {
				return usageError{errors.New("exec needs a command after --")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Node == "" {
				return usageError{errors.New("exec needs --node NODE")}
			}
			if timeout < time.Second || timeout > schema.MaxExecTimeoutSeconds*time.Second {
				return usageError{fmt.Errorf("--timeout must be between 1s and %s, not %s", schema.MaxExecTimeoutSeconds*time.Second, timeout)}
			}
			req.TimeoutSeconds = int(timeout / time.Second)
			req.Command = args[1:]
			if stdin {
				in, err := io.ReadAll(io.LimitReader(s.in, schema.MaxExecStdinBytes+1))
				if err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				if len(in) > schema.MaxExecStdinBytes {
					return usageError{fmt.Errorf("-i: standard input is over %d bytes", schema.MaxExecStdinBytes)}
				}
				req.Stdin = string(in)
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			code, err := c.Exec(ctx, namespace+"/"+args[0], req, func(ch api.ExecChunk) error {
				w := s.out
				if ch.Stream == schema.ExecStderr {
					w = s.err
				}
				if _, err := io.WriteString(w, ch.Data); err != nil {
					return err
				}
				if ch.Truncated {
					fmt.Fprintf(s.err, "edgesetctl: output past %d bytes was dropped\n", schema.MaxExecOutputBytes)
				}
				return nil
			})
			if err != nil {
				return cfg.explain(fmt.Errorf("exec in %s on node %s: %w", args[0], req.Node, err))
			}
			if code != 0 {
				return exitError{code: code, err: fmt.Errorf("%w: command exited with %d", errReported, code)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset")
	f.StringVar(&req.Node, "node", "", "node whose instance runs the command (required)")
	f.StringVarP(&req.Container, "container", "c", "", "container of the template (default: the first)")
	f.BoolVarP(&stdin, "stdin", "i", false, "pass standard input to the command (at most 64 KiB)")
	f.DurationVar(&timeout, "timeout", schema.DefaultExecTimeoutSeconds*time.Second, "end the session after this long")
	return cmd
}
