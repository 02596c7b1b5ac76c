// Package sim simulates a fleet of edge devices in one process: each
// virtual device is a real edgeagent.Node with its own MQTT connection,
// node name and token, over its own in-memory fake runtime. A Shape (the
// fleet YAML) says how labels and taints are spread over the devices and
// how they misbehave: slow starts, failing pulls, crash loops, flapping
// links and devices that go away for good.
//
// Data flow:
//
//	Shape --Profile(i)--> per-device profile --> fake.Runtime knobs,
//	                                             announced labels/taints,
//	                                             link schedule (flaps)
//	Fleet.Run: ramp --> edgeagent.Node.Run per device --> broker
//	           Link.Dial (source address 127.0.0.x, cut on flap)
//	Fleet.Snapshot --> live summary line and the JSON Report
//
// cmd/edgeset-sim is the command; sim/scale drives the scale benchmark.
package sim
