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
	"github.com/spf13/viper"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/cliconfig"
	"github.com/edgeset/edgeset/schema"
)

func main() {
	if err := newRootCmd(os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "edgeset-agent:", err)
		os.Exit(1)
	}
}

// newRootCmd is the edgeset-agent command: load, resolve, run.
func newRootCmd(stderr io.Writer) *cobra.Command {
	return newCommand(func(ctx context.Context, fc fileConfig, source string) error {
		s, err := fc.resolve(os.Hostname)
		if err != nil {
			return fmt.Errorf("config (%s): %w", source, err)
		}
		return run(ctx, s, source, stderr)
	})
}

// newCommand builds the command with its flags, environment and config
// file bound; runFn receives the merged configuration.
func newCommand(runFn func(ctx context.Context, fc fileConfig, source string) error) *cobra.Command {
	v := viper.New()
	cmd := &cobra.Command{
		Use:   "edgeset-agent",
		Short: "Run the edgeset agent: announce this device and run its daemons",
		Long: `edgeset-agent connects this device to the fleet's MQTT broker, announces
its labels, taints, capacity and health, and runs the daemons the controller
assigns to it through the container runtime, also while the broker is away.

Every flag is also a key of the config file (--config) and an environment
variable: --node-name is node-name and EDGESET_NODE_NAME. Precedence: flag,
environment, config file, default.`,
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
	cmd.AddCommand(newEnrollCmd(), newKeyCmd())
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
	node, err := newNode(s, rt, log)
	if err != nil {
		return err
	}
	log.Info("edgeset-agent starting", "version", schema.Version, "node", s.node.Agent.NodeName, "config", source,
		"broker", strings.Join(s.node.MQTT.BrokerURLs, ","), "runtime", s.runtime, "data", s.node.Agent.DataDir)
	start := time.Now()
	err = runNode(ctx, node, rt, s.metricsAddr, log)
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
