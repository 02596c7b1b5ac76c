package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// execFlags are exec's options besides the request's own.
type execFlags struct {
	namespace   string
	stdin, tty  bool
	timeout     time.Duration
	idleTimeout time.Duration
}

func newExecCmd(s *streams) *cobra.Command {
	var req api.ExecRequest
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec DAEMONSET --node NODE [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]",
		Short: "Run a command in a daemonset's container on one node",
		Long: `Exec asks a node's agent, over MQTT, to run a command in its instance of a
daemonset, and prints its output as it comes: stdout to stdout, stderr to
stderr. edgesetctl exits with the command's exit code. The command is an argv
(no shell unless you run one: -- sh -c '...').

With -i, edgesetctl's standard input is the command's, sent as it comes
(typed or piped; its end closes the command's input). With -t the command
runs on a terminal, its stderr merged into its stdout as kubectl exec -t
does; with -it and a terminal on edgesetctl's side, that terminal is put in
raw mode (restored however edgesetctl ends), its size is sent at the start
and on every change, and everything typed goes to the command: Ctrl-C to
it, Ctrl-D ends a shell's input as on a local terminal. The session ends
when the command does, with its exit code.

A session ends after --timeout (default 60s, 1h with -i or -t; at most 1h),
an interactive one also after --idle-timeout without input or output
(default 10m). The engine cannot stop a command it started, so one still
running then runs on in the container (a shell on a terminal gets a
hang-up).

The device decides: an agent runs remote commands only with allow-exec set in
its configuration; otherwise the request is refused (403). Every session is
in the audit log (node, container, command; never the input). Output past
4 MiB is dropped and said so; input is paced to 64 KiB/s.`,
		Example: `  edgesetctl exec exporter --node gw-0042 -- cat /etc/exporter.yaml
  edgesetctl exec fluentd --node gw-0042 -n logging -c forwarder -- sh -c 'ls -l /var/log'
  printf 'reload\n' | edgesetctl exec modbus-gw --node gw-0042 -i -- /bin/ctl
  edgesetctl exec modbus-gw --node gw-0042 -it -- /bin/sh`,
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
			if !cmd.Flags().Changed("timeout") && (f.stdin || f.tty) {
				f.timeout = schema.MaxExecTimeoutSeconds * time.Second
			}
			if err := f.check(); err != nil {
				return err
			}
			req.Command = args[1:]
			req.TimeoutSeconds = int(f.timeout / time.Second)
			term := s.terminal(f.tty)
			if f.stdin || f.tty {
				req.StdinStream, req.TTY = f.stdin, term != nil
				req.IdleTimeoutSeconds = int(f.idleTimeout / time.Second)
				if term != nil {
					req.Width, req.Height = term.size()
				}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			ds := f.namespace + "/" + args[0]
			code, err := runExec(cmd.Context(), s, c, ds, req, term)
			if err != nil {
				return cfg.explain(fmt.Errorf("exec in %s on node %s: %w", args[0], req.Node, err))
			}
			if code != 0 {
				return exitError{code: code, err: fmt.Errorf("%w: command exited with %d", errReported, code)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset")
	fl.StringVar(&req.Node, "node", "", "node whose instance runs the command (required)")
	fl.StringVarP(&req.Container, "container", "c", "", "container of the template (default: the first)")
	fl.BoolVarP(&f.stdin, "stdin", "i", false, "pass standard input to the command as it comes")
	fl.BoolVarP(&f.tty, "tty", "t", false, "run the command on a terminal (with -i and a local terminal: an interactive shell)")
	fl.DurationVar(&f.timeout, "timeout", schema.DefaultExecTimeoutSeconds*time.Second, "end the session after this long (default 60s, 1h with -i or -t)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", schema.DefaultExecIdleTimeoutSeconds*time.Second,
		"end an interactive session after this long without input or output")
	return cmd
}

// check refuses timeouts out of bounds, naming the flag.
func (f execFlags) check() error {
	maxTimeout := schema.MaxExecTimeoutSeconds * time.Second
	if f.timeout < time.Second || f.timeout > maxTimeout {
		return usageError{fmt.Errorf("--timeout must be between 1s and %s, not %s", maxTimeout, f.timeout)}
	}
	if f.idleTimeout < time.Second || f.idleTimeout > maxTimeout {
		return usageError{fmt.Errorf("--idle-timeout must be between 1s and %s, not %s", maxTimeout, f.idleTimeout)}
	}
	return nil
}

// terminal returns edgesetctl's terminal for -t: standard input when it is
// one; otherwise it says so, as kubectl does, and the session runs
// without a terminal.
func (s *streams) terminal(tty bool) *localTerminal {
	if !tty {
		return nil
	}
	t := openLocalTerminal(s.in, s.out)
	if t == nil {
		fmt.Fprintln(s.err, "Unable to use a TTY - input is not a terminal or the right kind of file")
	}
	return t
}

// runExec runs one session and returns the command's exit code. An
// interrupt or termination signal ends it (and the session on the node);
// with a terminal in raw mode Ctrl-C is no signal but a byte for the
// command.
func runExec(ctx context.Context, s *streams, c *api.Client, ds string, req api.ExecRequest, term *localTerminal) (int, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	nl := "\n"
	if term != nil {
		nl = "\r\n" // the terminal is raw: no newline translation
	}
	out := func(ch api.ExecChunk) error {
		w := s.out
		if ch.Stream == schema.ExecStderr {
			w = s.err
		}
		if _, err := io.WriteString(w, ch.Data); err != nil {
			return err
		}
		if ch.Truncated {
			fmt.Fprintf(s.err, "edgesetctl: output past %d bytes was dropped%s", schema.MaxExecOutputBytes, nl)
		}
		return nil
	}
	if !req.Interactive() {
		return c.Exec(ctx, ds, req, out)
	}
	return runInteractive(ctx, s, c, ds, req, term, out)
}
