package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/spf13/cobra"
)

// Exit codes of edgesetctl.
const (
	exitOK      = 0
	exitFailure = 1 // invalid input, I/O errors
	exitUsage   = 2 // bad flags or arguments

	exitDiffError = 2 // diff: any error (1 means differences, as in kubectl diff)
)

// streams are what one invocation of edgesetctl reads, writes and keeps
// time by, injected so that tests capture the output, fix the clock and
// shorten the polls, each test its own. The zero clock and watchEvery mean
// the defaults, time.Now and defaultWatchInterval.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
	// clock tells the time that ages in tables are measured against.
	clock func() time.Time
	// watchEvery is how often --watch and --follow poll the controller.
	watchEvery time.Duration
}

// defaultWatchInterval is how often --watch and --follow poll, as their
// help says.
const defaultWatchInterval = time.Second

// now reads the clock: one reading per output, so that every row of a
// table ages against the same instant.
func (s *streams) now() time.Time {
	if s.clock == nil {
		return time.Now()
	}
	return s.clock()
}

// watchInterval is how often --watch and --follow poll the controller.
func (s *streams) watchInterval() time.Duration {
	if s.watchEvery <= 0 {
		return defaultWatchInterval
	}
	return s.watchEvery
}

// commands lists the constructors of edgesetctl's subcommands; add new
// commands here (each in its own file).
var commands = []func(*streams) *cobra.Command{
	newValidateCmd,
	newKeysCmd,
	newExplainCmd,
	newEventsCmd,
	newApplyCmd,
	newDiffCmd,
	newGetCmd,
	newDescribeCmd,
	newDeleteCmd,
	newLogsCmd,
	newExecCmd,
	newRolloutCmd,
	newLabelCmd,
	newTaintCmd,
	func(s *streams) *cobra.Command { return newCordonCmd(s, true) },
	func(s *streams) *cobra.Command { return newCordonCmd(s, false) },
	newDrainCmd,
	newTokenCmd,
	newNodeCmd,
	newUserCmd,
	newAuditCmd,
	newEnrollmentCmd,
	newImageCmd,
	newAgentCmd,
	newVersionCmd,
}

// errReported means a command has already printed its problems; run only
// sets the exit code.
var errReported = errors.New("problems reported")

// usageError marks an error in the command line itself.
type usageError struct{ error }

// exitError makes run exit with code instead of exitFailure (diff: 1
// means differences, so its errors exit 2, as kubectl diff's do). An
// error that wraps errReported is not printed again.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// newRootCmd builds the edgesetctl command tree over s.
func newRootCmd(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "edgesetctl",
		Short:         "Operate edgeset: DaemonSets for edge and IoT fleets over MQTT",
		Version:       schema.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if err.Error() == "flag needs an argument: --dry-run" {
			err = fmt.Errorf(`%w: "none", "server", or "client" (--dry-run=server)`, err)
		}
		return usageError{err}
	})
	addClientFlags(root.PersistentFlags())
	for _, newCmd := range commands {
		root.AddCommand(newCmd(s))
	}
	addCompletions(root)
	return root
}

// run executes edgesetctl with args and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(&streams{in: stdin, out: stdout, err: stderr})
	root.SetArgs(args)
	err := root.Execute()
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if !errors.Is(err, errReported) {
			fmt.Fprintf(stderr, "edgesetctl: %v\n", err)
		}
		return ee.code
	case errors.Is(err, errReported):
		return exitFailure
	case errors.As(err, &ue), isCobraUsageError(err):
		fmt.Fprintf(stderr, "edgesetctl: %v\nRun 'edgesetctl --help' for usage.\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "edgesetctl: %v\n", err)
		return exitFailure
	}
}

// isCobraUsageError recognises cobra's errors for unknown commands and bad
// argument counts, which it returns as plain errors.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "accepts ", "requires at least", "unknown flag", "unknown shorthand flag"} {
		if len(msg) >= len(prefix) && msg[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}
