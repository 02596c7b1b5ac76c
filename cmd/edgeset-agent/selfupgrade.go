package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/edgeagent/imagefetch"
	"github.com/edgeset/edgeset/edgeagent/selfupdate"
	"github.com/edgeset/edgeset/schema"
)

// servesAgent reports whether args (without the program name) run the
// agent itself, rather than a subcommand (always the first argument: the
// root's flags are not inherited), help or the version: only then does a
// start count as a start of a binary on trial.
func servesAgent(args []string) bool {
	if len(args) > 0 && slices.Contains([]string{"version", "enroll", "help", "completion"}, args[0]) {
		return false
	}
	for _, a := range args {
		switch {
		case a == "--":
			return true
		case a == "--help" || a == "-h" || a == "--version" || a == "-v":
			return false
		}
	}
	return true
}

// startSelf runs selfupdate.Start for the running binary, with its own
// plain logger (the configured one is not known yet). A nil Boot means
// self-upgrade is off: the binary's path is unknown.
func startSelf(stderr io.Writer) (*selfupdate.Boot, error) {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	exe, err := selfupdate.Executable()
	if err != nil {
		log.Warn("the agent cannot upgrade itself", "err", err)
		return nil, nil
	}
	boot, err := selfupdate.Start(exe, log)
	if errors.Is(err, selfupdate.ErrRestart) {
		return nil, err
	}
	if err != nil {
		log.Error("the agent's trial record", "err", err)
	}
	return &boot, nil
}

// newUpgrader returns the agent's self-upgrader for boot, fetching from
// the controller when image-url is set; nil when boot is nil.
func newUpgrader(boot *selfupdate.Boot, s imageSettings, node string, log *slog.Logger) (*selfupdate.Upgrader, error) {
	if boot == nil {
		return nil, nil
	}
	opts := selfupdate.Options{Boot: *boot, Log: log}
	if s.url != "" {
		client, err := imageClient(s)
		if err != nil {
			return nil, err
		}
		f, err := imagefetch.New(imagefetch.Options{URL: s.url, Node: node, Token: s.token, Dir: boot.Paths.Downloads, Client: client, Log: log})
		if err != nil {
			return nil, fmt.Errorf("agent upgrades: %w", err)
		}
		opts.Fetcher = f
	}
	return selfupdate.New(opts), nil
}

// runUpgrader runs u beside the node (nothing when u is nil); its
// ErrRestart ends the agent, to be restarted into another binary.
func runUpgrader(ctx context.Context, u *selfupdate.Upgrader) error {
	if u == nil {
		<-ctx.Done()
		return nil
	}
	return u.Run(ctx)
}

// newVersionCmd prints the agent's version and platform; --json is what
// an upgrade checks a new binary with.
func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the agent's version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := selfupdate.Info()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "edgeset-agent %s %s (self-upgrade format %d)\n", info.Version, schema.DisplayAgentPlatform(info.Platform), info.SelfUpgrade)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, platform, selfUpgrade")
	return cmd
}
