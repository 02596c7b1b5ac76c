package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/edgeset/edgeset/sim/scale"
)

// runHost is the benchmark's controller subprocess: it serves until ctx
// ends or its stdin closes (the benchmark exited).
func runHost(ctx context.Context, dir string, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return scale.Host(ctx, dir, scale.HostOptions{}, stdout)
}

// runBench runs the scale benchmark and prints its figures.
func runBench(ctx context.Context, f flags, stdout io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	res, err := scale.Run(ctx, scale.Options{
		Nodes: f.nodes, Ramp: f.ramp, HostCommand: []string{exe, "--controller-host"},
		CPUProfile: f.cpuProfile, Progress: stdout,
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
	fmt.Fprintf(w, "registered after ramp   %.2fs\n", r.RegisterSeconds)
	fmt.Fprintf(w, "apply -> all running    %.2fs\n", r.ApplySeconds)
	fmt.Fprintf(w, "rollout (maxUnav. 10%%)  %.2fs\n", r.RolloutSeconds)
	fmt.Fprintf(w, "controller live heap    %.1f MiB -> %.1f MiB, %.2f KiB per node (goroutines %d -> %d)\n",
		float64(r.HeapBefore.LiveBytes)/kib/kib, float64(r.HeapAfter.LiveBytes)/kib/kib, r.HeapPerNode()/kib,
		r.HeapBefore.Goroutines, r.HeapAfter.Goroutines)
	fmt.Fprintf(w, "controller heap alloc   %.1f MiB after GC\n", float64(r.HeapAfter.HeapAlloc)/kib/kib)
	fmt.Fprintf(w, "controller RSS          %.1f MiB -> %.1f MiB, %.2f KiB per node\n",
		float64(r.RSSBefore)/kib/kib, float64(r.RSSAfter)/kib/kib, r.RSSPerNode()/kib)
	fmt.Fprintf(w, "rollout MQTT bytes/node %.0f (controller payload bytes published)\n", r.RolloutBytesPerNode)
}
