package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
	"github.com/edgeset/edgeset/sim"
	"github.com/edgeset/edgeset/sim/scale"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "edgeset-sim:", err)
		os.Exit(1)
	}
}

// flags are the command line.
type flags struct {
	brokerURLs                                             []string
	secretFile, tokenFile, fleetFile, reportFile           string
	namePrefix, sourceRange, logLevel, hostDir, cpuProfile string
	deviceCPUProfile                                       string
	trustRoot                                              string
	nodes, deviceProcesses, subscribeQoS, publishQoS       int
	ramp                                                   float64
	duration, interval, keepAlive                          time.Duration
	bench, benchDevices, summary, version, signing         bool
	verifyEach                                             bool
	// args are the report files of --summary.
	args []string
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := pflag.NewFlagSet("edgeset-sim", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringSliceVar(&f.brokerURLs, "broker-url", []string{"tcp://127.0.0.1:1883"}, "MQTT broker the devices connect to; a comma-separated list of a cluster's nodes spreads the devices evenly over them")
	fs.IntVar(&f.nodes, "nodes", 100, "number of simulated devices (with --token-file, 0 means every name in it)")
	fs.StringVar(&f.secretFile, "fleet-secret-file", "", "the controller's DATA_DIR/fleet.secret: derive each device's token (read only)")
	fs.StringVar(&f.tokenFile, "token-file", "", `file of "NAME TOKEN" lines: device names and tokens (instead of --fleet-secret-file)`)
	fs.StringVar(&f.fleetFile, "fleet", "", "fleet YAML: label and taint distributions, behaviour (see sim.Shape)")
	fs.StringVar(&f.reportFile, "report", "", "write a JSON report here on exit")
	fs.DurationVar(&f.duration, "duration", 0, "exit after this long (default: until Ctrl-C)")
	fs.StringVar(&f.namePrefix, "name-prefix", sim.DefaultNamePrefix, "device names are this prefix and a number")
	fs.Float64Var(&f.ramp, "ramp", 500, "devices started per second (0: all at once)")
	fs.StringVar(&f.sourceRange, "source-range", "127.0.0.2-127.0.0.254", `local addresses to dial from, round-robin ("" lets the kernel choose; use "" for a remote broker)`)
	fs.DurationVar(&f.keepAlive, "keepalive", 60*time.Second, "MQTT keepalive of every device")
	fs.IntVar(&f.subscribeQoS, "subscribe-qos", 1, "QoS of every device's subscriptions, 0 or 1 (0 on a NATS cluster: edgeset-agent --subscribe-qos)")
	fs.IntVar(&f.publishQoS, "publish-qos", 1, "QoS of every device's publishes, 0 or 1 (0 on a NATS cluster: edgeset-agent --publish-qos)")
	fs.DurationVar(&f.interval, "interval", 2*time.Second, "how often to print the summary line")
	fs.StringVar(&f.logLevel, "log-level", "error", "agent log level: debug, info, warn or error")
	fs.BoolVar(&f.bench, "bench", false, "run the scale benchmark (controller subprocess plus --nodes devices) instead")
	fs.StringVar(&f.deviceCPUProfile, "device-cpuprofile", "", "with --bench and one device process: write this process's CPU profile of each phase here (the simulated devices), named as --cpuprofile's")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "with --bench: write the controller's CPU profile of each phase here, the phase before the extension (cpu.pprof: cpu.register.pprof, cpu.apply.pprof, cpu.rollout.pprof)")
	fs.IntVar(&f.deviceProcesses, "device-processes", 1, "with --bench: run the devices in this many processes, each its share (one process may hold 20,000 open files)")
	fs.BoolVar(&f.signing, "signing", false, "with --bench: the controller signs what it publishes and every device pins a fleet root made for the run and verifies each document")
	fs.StringVar(&f.trustRoot, "trust-root", "", `the fleet root every device pins ("ed25519:BASE64", as edgesetctl keys show prints it): the devices verify what the controller signs`)
	fs.BoolVar(&f.verifyEach, "verify-each", false, "with --trust-root or --signing: every device verifies every signature itself (default: the devices share a cache of the signatures one of them verified, since on a fleet each verifies on its own CPU, not the machine's under test)")
	fs.BoolVar(&f.benchDevices, "bench-devices", false, "internal: run one device process of the benchmark")
	fs.BoolVar(&f.summary, "summary", false, "print min / median / max of the --bench --report files given as arguments, per fleet size")
	fs.StringVar(&f.hostDir, "controller-host", "", "internal: run the benchmark's controller host in this data directory")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	_ = fs.MarkHidden("controller-host")
	_ = fs.MarkHidden("bench-devices")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	f.args = fs.Args()
	switch {
	case f.summary && len(f.args) == 0:
		return f, errors.New("--summary: give the report files as arguments")
	case !f.summary && len(f.args) > 0:
		return f, fmt.Errorf("unexpected arguments %q", f.args)
	}
	return f, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return nil
	case err != nil:
		return err
	case f.version:
		fmt.Fprintln(stdout, "edgeset-sim", schema.Version)
		return nil
	case f.hostDir != "":
		return runHost(ctx, f.hostDir, f.signing, stdout)
	case f.summary:
		return runSummary(f.args, stdout)
	case f.bench:
		return runBench(ctx, f, stdout)
	case f.benchDevices:
		return runBenchDevices(ctx, f, stdout)
	}
	return runFleet(ctx, f, stdout)
}

// runFleet runs the simulated fleet until ctx ends or --duration passes,
// printing the summary line, then writes the report.
func runFleet(ctx context.Context, f flags, stdout io.Writer) error {
	opts, err := fleetOptions(f)
	if err != nil {
		return err
	}
	if err := scale.RaiseFDLimit(); err != nil {
		fmt.Fprintln(os.Stderr, "edgeset-sim: warning:", err)
	}
	fleet, err := sim.New(opts)
	if err != nil {
		return err
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- fleet.Run(ctx) }()
	err = printSummaries(ctx, fleet, f.interval, stdout, done)
	line := newLiner(stdout)
	line.print(fleet.Snapshot().Line())
	line.end()
	if f.reportFile != "" {
		if werr := writeJSON(f.reportFile, fleet.Report()); err == nil {
			err = werr
		}
	}
	return err
}

// fleetOptions builds the fleet's options from the flags, naming the flag
// or file of any error.
func fleetOptions(f flags) (sim.Options, error) {
	opts := sim.Options{BrokerURLs: f.brokerURLs, Nodes: f.nodes, NamePrefix: f.namePrefix, Ramp: f.ramp, KeepAlive: f.keepAlive,
		SubscribeAtMostOnce: f.subscribeQoS == 0, PublishAtMostOnce: f.publishQoS == 0}
	if f.subscribeQoS != 0 && f.subscribeQoS != 1 {
		return opts, fmt.Errorf("--subscribe-qos: %d is not 0 or 1", f.subscribeQoS)
	}
	if f.publishQoS != 0 && f.publishQoS != 1 {
		return opts, fmt.Errorf("--publish-qos: %d is not 0 or 1", f.publishQoS)
	}
	level, err := parseLevel(f.logLevel)
	if err != nil {
		return opts, err
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if opts.SourceAddrs, err = sim.ParseSourceRange(f.sourceRange); err != nil {
		return opts, fmt.Errorf("--source-range: %w", err)
	}
	if f.fleetFile != "" {
		if opts.Shape, err = sim.LoadShape(f.fleetFile); err != nil {
			return opts, err
		}
	} else if opts.Shape, err = sim.ParseShape(nil); err != nil {
		return opts, err
	}
	if f.trustRoot != "" {
		if opts.TrustRoot, err = signing.ParsePublicKey(f.trustRoot); err != nil {
			return opts, fmt.Errorf("--trust-root: %w", err)
		}
	}
	opts.VerifyEach = f.verifyEach
	switch {
	case f.secretFile != "" && f.tokenFile != "":
		return opts, errors.New("--fleet-secret-file and --token-file: give one, not both")
	case f.secretFile != "":
		secret, err := sim.ReadFleetSecret(f.secretFile)
		if err != nil {
			return opts, fmt.Errorf("--fleet-secret-file: %w", err)
		}
		opts.Tokens = sim.SecretTokens(secret)
	case f.tokenFile != "":
		tf, err := sim.ReadTokenFile(f.tokenFile)
		if err != nil {
			return opts, fmt.Errorf("--token-file: %w", err)
		}
		opts.Names, opts.Tokens = tf.Names, tf.Tokens()
	default:
		return opts, errors.New("credentials: give --fleet-secret-file (the controller's DATA_DIR/fleet.secret) or --token-file")
	}
	return opts, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// printSummaries prints the fleet's summary line every interval until the
// fleet's Run returns, and returns its error.
func printSummaries(ctx context.Context, fleet *sim.Fleet, interval time.Duration, out io.Writer, done <-chan error) error {
	t := time.NewTicker(max(interval, 100*time.Millisecond))
	defer t.Stop()
	line := newLiner(out)
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return err
			}
			return err
		case <-t.C:
			line.print(fleet.Snapshot().Line())
		}
	}
}

// liner prints status lines: rewritten in place on a terminal, one per
// line otherwise.
type liner struct {
	out      io.Writer
	terminal bool
}

func newLiner(out io.Writer) liner {
	f, ok := out.(*os.File)
	if !ok {
		return liner{out: out}
	}
	st, err := f.Stat()
	return liner{out: out, terminal: err == nil && st.Mode()&os.ModeCharDevice != 0}
}

func (l liner) print(s string) {
	if l.terminal {
		fmt.Fprintf(l.out, "\r\033[K%s", s)
		return
	}
	fmt.Fprintln(l.out, s)
}

// end finishes a rewritten line.
func (l liner) end() {
	if l.terminal {
		fmt.Fprintln(l.out)
	}
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}
