package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/edgeset/edgeset/sim/scale"
)

// runHost is the benchmark's controller subprocess: it serves until ctx
// ends or its stdin closes (the benchmark exited).
func runHost(ctx context.Context, dir string, signing bool, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return scale.Host(ctx, dir, scale.HostOptions{Signing: signing}, stdout)
}

// runBenchDevices is one device process of the benchmark: its share of
// the fleet, until its stdin closes (scale.RunDevices).
func runBenchDevices(ctx context.Context, f flags, stdout io.Writer) error {
	opts, err := fleetOptions(f)
	if err != nil {
		return err
	}
	return scale.RunDevices(ctx, opts, os.Stdin, stdout)
}

// runBench runs the scale benchmark and prints its figures.
func runBench(ctx context.Context, f flags, stdout io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	host := []string{exe, "--controller-host"}
	if f.signing {
		host = []string{exe, "--signing", "--controller-host"}
	}
	res, err := scale.Run(ctx, scale.Options{
		Nodes: f.nodes, Ramp: f.ramp, HostCommand: host, Signing: f.signing, VerifyEach: f.verifyEach,
		DeviceProcesses: f.deviceProcesses, DeviceCommand: []string{exe, "--bench-devices", "--log-level", f.logLevel},
		CPUProfile: f.cpuProfile, DeviceCPUProfile: f.deviceCPUProfile, Progress: stdout,
	})
	if f.reportFile != "" {
		if werr := writeJSON(f.reportFile, res); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	printResult(stdout, res)
	return nil
}

func printResult(w io.Writer, r scale.Result) {
	const kib = 1024.0
	fmt.Fprintf(w, "nodes %d (ramp %.2fs, connect p50 %.3fs p99 %.3fs max %.3fs)\n",
		r.Nodes, r.RampSeconds, r.Fleet.ConnectSeconds.P50, r.Fleet.ConnectSeconds.P99, r.Fleet.ConnectSeconds.Max)
	fmt.Fprintf(w, "registered after ramp   %.2fs (then settled in %.2fs)\n", r.RegisterSeconds, r.SettleSeconds)
	fmt.Fprintf(w, "apply -> all running    %.2fs\n", r.ApplySeconds)
	fmt.Fprintf(w, "rollout (maxUnav. 10%%)  %.2fs\n", r.RolloutSeconds)
	fmt.Fprintf(w, "controller live heap    %.1f MiB -> %.1f MiB, %.2f KiB per node (goroutines %d -> %d)\n",
		float64(r.HeapBefore.LiveBytes)/kib/kib, float64(r.HeapAfter.LiveBytes)/kib/kib, r.HeapPerNode()/kib,
		r.HeapBefore.Goroutines, r.HeapAfter.Goroutines)
	fmt.Fprintf(w, "controller heap alloc   %.1f MiB after GC\n", float64(r.HeapAfter.HeapAlloc)/kib/kib)
	fmt.Fprintf(w, "controller RSS          %.1f MiB -> %.1f MiB, %.2f KiB per node\n",
		float64(r.RSSBefore)/kib/kib, float64(r.RSSAfter)/kib/kib, r.RSSPerNode()/kib)
	fmt.Fprintf(w, "rollout MQTT bytes/node %.0f (controller payload bytes published)\n", r.RolloutBytesPerNode)
	fmt.Fprintln(w, r.RegisterTraffic.Line("register", r.Nodes))
	fmt.Fprintln(w, r.ApplyTraffic.Line("apply", r.Nodes))
	fmt.Fprintln(w, r.RolloutTraffic.Line("rollout", r.Nodes))
	if fin := r.Fleet.Final; fin.SignaturesVerified+fin.SignaturesShared > 0 {
		fmt.Fprintf(w, "device signatures       %d verified, %d accepted from the devices' shared cache (--verify-each: none)\n",
			fin.SignaturesVerified, fin.SignaturesShared)
	}
	phases := []struct {
		name string
		cpu  scale.PhaseCPU
	}{{"register", r.RegisterCPU}, {"apply", r.ApplyCPU}, {"rollout", r.RolloutCPU}}
	for _, p := range phases {
		fmt.Fprintln(w, p.cpu.Line(p.name))
	}
	for _, p := range phases {
		if p.cpu.Profile != nil {
			printSplit(w, p.name, *p.cpu.Profile)
		}
	}
}

// printSplit prints the owners of a phase's controller host profile:
// one line per part with its largest packages.
func printSplit(w io.Writer, phase string, s scale.ProfileSplit) {
	const topPackages = 5
	fmt.Fprintf(w, "%s profile: controller host sampled %.2fs CPU\n", phase, s.Seconds)
	for _, part := range s.Parts {
		var pkgs []string
		for _, p := range part.Packages[:min(topPackages, len(part.Packages))] {
			pkgs = append(pkgs, fmt.Sprintf("%s %.2fs", shortPackage(p.Package), p.Seconds))
		}
		fmt.Fprintf(w, "  %-10s %5.1f%% %6.2fs  %s\n", part.Part, percent(part.Seconds, s.Seconds), part.Seconds, strings.Join(pkgs, ", "))
	}
}

func percent(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

// shortPackage drops the module prefix of edgeset's packages and the
// host of others: controller/reconcile, mochi-mqtt/server/v2.
func shortPackage(pkg string) string {
	if p, ok := strings.CutPrefix(pkg, "github.com/edgeset/edgeset/"); ok {
		return p
	}
	if p, ok := strings.CutPrefix(pkg, "github.com/"); ok {
		return p
	}
	return pkg
}

// runSummary reads --bench reports and prints one spread line per fleet
// size: apply and rollout (min / median / max), then their CPU medians.
func runSummary(files []string, stdout io.Writer) error {
	var results []scale.Result
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("--summary: %w", err)
		}
		var r scale.Result
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("--summary: %s: %w", file, err)
		}
		if r.Nodes <= 0 || r.ApplySeconds <= 0 || r.RolloutSeconds <= 0 {
			return fmt.Errorf("--summary: %s: not the report of a completed run (nodes %d, apply %gs, rollout %gs)",
				file, r.Nodes, r.ApplySeconds, r.RolloutSeconds)
		}
		results = append(results, r)
	}
	for _, s := range scale.Summarize(results) {
		printSummary(stdout, s)
	}
	return nil
}

func printSummary(w io.Writer, s scale.Summary) {
	spread := func(x scale.Spread) string {
		return fmt.Sprintf("min %.2fs median %.2fs max %.2fs", x.Min, x.Median, x.Max)
	}
	fmt.Fprintf(w, "summary %d nodes, %d runs: apply %s; rollout %s\n", s.Nodes, s.Runs, spread(s.Apply), spread(s.Rollout))
	fmt.Fprintf(w, "summary %d nodes, %d runs: CPU medians: apply controller %.2fs simulator %.2fs; rollout controller %.2fs simulator %.2fs\n",
		s.Nodes, s.Runs, s.ApplyController.Median, s.ApplySimulator.Median, s.RolloutController.Median, s.RolloutSimulator.Median)
}
