package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/selfupdate"
	"github.com/edgeset/edgeset/internal/cliconfig"
	"github.com/edgeset/edgeset/schema"
)

func main() {
	// The trial record comes first, before the flags and the config are
	// read: a new version that cannot read them must still count its
	// starts and roll back (edgeagent/selfupdate).
	var boot *selfupdate.Boot
	if servesAgent(os.Args[1:]) {
		var err error
		if boot, err = startSelf(os.Stderr); errors.Is(err, selfupdate.ErrRestart) {
			os.Exit(selfupdate.ExitRestart)
		}
	}
	err := newRootCmdBoot(os.Stderr, boot).Execute()
	if errors.Is(err, selfupdate.ErrRestart) {
		fmt.Fprintln(os.Stderr, "edgeset-agent: restarting into another agent binary")
		os.Exit(selfupdate.ExitRestart)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgeset-agent:", err)
		os.Exit(1)
	}
}

// newRootCmd is the edgeset-agent command: load, resolve, run, without
// self-upgrade.
func newRootCmd(stderr io.Writer) *cobra.Command { return newRootCmdBoot(stderr, nil) }

// newRootCmdBoot is newRootCmd that upgrades the agent from boot
// (selfupdate.Start's; nil: no self-upgrade).
func newRootCmdBoot(stderr io.Writer, boot *selfupdate.Boot) *cobra.Command {
	return newCommand(func(ctx context.Context, fc fileConfig, source string) error {
		s, err := fc.resolve(os.Hostname)
		if err != nil {
			return fmt.Errorf("config (%s): %w", source, err)
		}
		s.boot = boot
		return run(ctx, s, source, stderr)
	})
}

// newCommand builds the command with its flags, environment and config
// file bound; runFn receives the merged configuration.
func newCommand(runFn func(ctx context.Context, fc fileConfig, source string) error) *cobra.Command {
	v := cliconfig.New(envNames)
	cmd := &cobra.Command{
		Use:   "edgeset-agent",
		Short: "Run the edgeset agent: announce this device and run its daemons",
		Long: `edgeset-agent connects this device to the fleet's MQTT broker, announces
its labels, taints, capacity and health, and runs the daemons the controller
assigns to it through the container runtime, also while the broker is away.

Every flag is also a key of the config file (--config) and an environment
variable: --node-name is node-name and EDGESET_NODE_NAME (but the node token
is EDGESET_NODE_TOKEN or EDGESET_NODE_TOKEN_FILE: EDGESET_TOKEN is edgesetctl's
API token). Precedence: flag, environment, config file, default.`,
		Version:       schema.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, source, err := loadConfig(v)
			if err != nil {
				return err
			}
			return runFn(cmd.Context(), fc, source)
		},
	}
	addFlags(cmd.Flags())
	cliconfig.Bind(v, cmd.Flags())
	cmd.AddCommand(newEnrollCmd(), newVersionCmd(), newKeyCmd())
	return cmd
}

// run runs the agent until ctx ends or SIGINT/SIGTERM arrives; a
// cancellation is a clean exit (nil).
func run(ctx context.Context, s settings, source string, stderr io.Writer) error {
	log, err := newLogger(s.logLevel, s.logFormat, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rt, closeRT, err := newRuntime(ctx, s.runtime, s.dockerHost)
	if err != nil {
		return err
	}
	defer closeRT()
	upgrader, err := newUpgrader(s.boot, s.images, s.node.Agent.NodeName, log)
	if err != nil {
		return err
	}
	if upgrader != nil {
		s.node.Agent.SelfUpgrade = upgrader
	}
	node, err := newNode(s, rt, log)
	if err != nil {
		return err
	}
	log.Info("edgeset-agent starting", "version", schema.Version, "node", s.node.Agent.NodeName, "config", source,
		"broker", strings.Join(s.node.MQTT.BrokerURLs, ","), "runtime", s.runtime, "data", s.node.Agent.DataDir)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return runNode(gctx, node, rt, s.metricsAddr, log) })
	g.Go(func() error { return runUpgrader(gctx, upgrader) })
	err = g.Wait()
	log.Info("edgeset-agent stopped", "uptime", time.Since(start).Round(time.Second))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// newNode prepares the data directory, the announcer and the node.
func newNode(s settings, rt edgeagent.Runtime, log *slog.Logger) (*edgeagent.Node, error) {
	if err := os.MkdirAll(s.node.Agent.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data-dir: %w", err)
	}
	ann, err := edgeagent.NewAnnouncer(s.announce, rt)
	if err != nil {
		return nil, err
	}
	opts := s.node
	opts.Agent.Logger = log
	if opts.Agent.Images, err = imageFetcher(s.images, opts.Agent.NodeName, opts.Agent.DataDir, rt); err != nil {
		return nil, err
	}
	if opts.Agent.KeyRegistrar, err = keyRegistrar(s.keys, opts.Agent.NodeName); err != nil {
		return nil, err
	}
	opts.Status = ann.Status
	if s.telemetry {
		opts.Telemetry = edgeagent.NewTelemeter(s.node.Agent.NodeName, s.node.Agent.DataDir, rt).Measure
	}
	return edgeagent.NewNode(opts, rt)
}

// runNode runs the node and, when addr is set, the metrics server beside it.
func runNode(ctx context.Context, node *edgeagent.Node, rt edgeagent.Runtime, addr string, log *slog.Logger) error {
	if addr == "" {
		return node.Run(ctx)
	}
	srv, err := startMetrics(addr, node, rt, log)
	if err != nil {
		return err
	}
	defer srv.close()
	return node.Run(ctx)
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log-level: %q is not debug, info, warn or error", level)
	}
	return cliconfig.NewLogger(l, format, w), nil
}
