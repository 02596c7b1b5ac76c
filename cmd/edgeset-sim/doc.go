// Command edgeset-sim runs a simulated fleet of edge devices in one
// process: N virtual agents (edgeagent.Node over the in-memory fake
// runtime), each a real MQTT client with its own node name and token,
// connecting to a broker from source addresses spread over 127.0.0.x at a
// configurable ramp. The fleet YAML (--fleet) spreads labels and taints
// over the devices and makes some of them slow, failing, crash-looping,
// flapping or gone for good.
//
// Usage:
//
//	edgeset-sim --broker-url tcp://127.0.0.1:1883 --fleet-secret-file data/fleet.secret \
//	    --nodes 1000 --ramp 500 --fleet fleet.yaml --report report.json
//
// It prints a summary line every --interval (connected devices, ready
// instances, per daemonset the ready/total instances of each revision) and
// writes a JSON report on exit (Ctrl-C or --duration).
//
// With --bench it runs the fleet scale benchmark instead: a controller
// with its embedded broker in a subprocess (this binary re-run with
// --controller-host), --nodes devices, and the timings of registration,
// apply and a rolling update, with the CPU time of the controller process
// and of this one (the simulated agents) per phase; --cpuprofile adds a
// controller profile per phase, split between controller and broker code.
// `make bench-scale` runs it SCALE_RUNS times for 1,000 and 10,000 devices,
// then --summary prints the spread (min / median / max) of their reports.
// See docs/benchmarks.md, "Fleet scale".
package main
