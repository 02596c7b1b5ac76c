package controller

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// The benchmarks of issue 14's targets: a fleet of EDGESET_BENCH_NODES
// registered nodes (default 100,000) and 20 daemonsets (or
// EDGESET_BENCH_DAEMONSETS, to see how the heap grows with them), in
// process: the nodes' messages are handed to the controller as a broker
// would, and its transport only counts what it publishes
// (countingTransport), so the figures are the controller's own work,
// without a broker. `make bench-controller` runs them at 10,000 and
// 100,000 nodes.

// scaleDaemonSets is the number of daemonsets of the scale fleet: 20, or
// EDGESET_BENCH_DAEMONSETS (at least 1: daemon-00 is the one the node
// event benchmark toggles).
func scaleDaemonSets() int {
	if v, err := strconv.Atoi(os.Getenv("EDGESET_BENCH_DAEMONSETS")); err == nil && v > 0 {
		return v
	}
	return 20
}

// idleDaemonSets is EDGESET_BENCH_IDLE_DAEMONSETS (default none): how many
// daemonsets that select no node the scale fleet has besides its
// scaleDaemonSets, to see whether the heap grows with daemonsets or with
// placements.
func idleDaemonSets() int {
	v, _ := strconv.Atoi(os.Getenv("EDGESET_BENCH_IDLE_DAEMONSETS"))
	return max(v, 0)
}

// idleManifest is idle daemonset i: it selects the nodes labelled
// extra=never, which none is.
func idleManifest(i int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: idle-%02d, namespace: fleet}
spec:
  selector: {matchLabels: {app: idle-%02d}}
  template:
    metadata: {labels: {app: idle-%02d}}
    spec:
      nodeSelector: {extra: never}
      containers:
      - name: main
        image: registry.example.com/edge/idle-%02d:1.0
`, i, i, i, i)
}

// scaleManifest is daemonset i of the scale fleet: a mix of fleet-wide
// ones, node selectors on role and site, and daemon-00, which selects the
// nodes labelled extra=on (the label the event benchmark toggles).
func scaleManifest(i int, image string) string {
	selector := []string{"{role: gateway, tier: silver}", "{role: gateway}", "{tier: gold}", "{}"}[i%4]
	if i == 0 {
		selector = "{extra: 'on'}"
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: daemon-%02d, namespace: fleet}
spec:
  selector: {matchLabels: {app: daemon-%02d}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: "10%%"}}
  template:
    metadata: {labels: {app: daemon-%02d}}
    spec:
      nodeSelector: %s
      tolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]
      containers:
      - name: main
        image: registry.example.com/edge/daemon-%02d:%s
        resources: {limits: {cpu: 50m, memory: 32Mi}}
`, i, i, i, selector, i, image)
}

// scaleStatus is node i's announcement, with the extra label when on.
func scaleStatus(i int, extra bool) []byte {
	name := fmt.Sprintf("node-%06d", i)
	labels := map[string]string{"site": fmt.Sprint("site-", i%500), "tier": []string{"gold", "silver"}[i%2]}
	if extra {
		labels["extra"] = "on"
	}
	st := gateway(name, labels)
	st.SchemaVersion = schema.WireVersion
	b, _ := schema.Encode(st)
	return b
}

// scaleFleet is a controller whose transport only counts (no broker: the
// figures are the controller's own) with n registered nodes.
type scaleFleet struct {
	benchFleet
	// onDesired, when set, is called with the node of every desired
	// state published.
	onDesired atomic.Pointer[func(node string)]
}

// registerScale registers n nodes with f's controller, without waiting
// for their desired states.
func registerScale(f *scaleFleet, n int) {
	for i := range n {
		name := fmt.Sprintf("node-%06d", i)
		online, _ := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: name, Online: true, Session: 1})
		f.tc.handleMessage(schema.NodeTopic(name, schema.TopicStatus), scaleStatus(i, false))
		f.tc.handleMessage(schema.NodeTopic(name, schema.TopicOnline), online)
	}
}

// newScaleFleet starts a controller with n registered nodes running the
// scaleDaemonSets daemonsets, every desired state published; it reports
// the heap per node at that point, and the daemonsets. The scale benchmarks take minutes: they run only
// when EDGESET_BENCH_NODES asks for them (make bench-controller).
func newScaleFleet(b *testing.B, n int) *scaleFleet {
	if os.Getenv("EDGESET_BENCH_NODES") == "" {
		b.Skip("a scale benchmark: run it with make bench-controller, or EDGESET_BENCH_NODES=N")
	}
	base := heapAlloc()
	f := &scaleFleet{}
	f.n = n
	f.tc = startController(b, Config{RepublishRate: 1 << 20, Signing: benchSigning(), newTransport: countingTransportOf(func(m mqttclient.Message) {
		node, kind, ok := schema.ParseNodeTopic(m.Topic)
		if !ok || kind != schema.TopicDesired {
			return
		}
		f.published.Add(1)
		f.bytes.Add(int64(len(m.Payload)))
		if fn := f.onDesired.Load(); fn != nil {
			(*fn)(node)
		}
	})})
	registerScale(f, n)
	f.waitPublished(b, int64(n))
	daemonsets := scaleDaemonSets()
	for i := range daemonsets {
		before := f.published.Load()
		f.tc.applyYAML(b, scaleManifest(i, "1.0"))
		if i > 0 {
			f.waitPublished(b, before+int64(f.matching(i)))
		}
	}
	idle := idleDaemonSets()
	for i := range idle {
		f.tc.applyYAML(b, idleManifest(i))
	}
	// The pass after a fleet-wide change places its nodes again (their
	// published state changed): settle before measuring.
	f.settle(b)
	b.ReportMetric(float64(heapAlloc()-base)/float64(n), "heap-B/node")
	b.ReportMetric(float64(daemonsets), "daemonsets")
	if idle > 0 {
		b.ReportMetric(float64(idle), "idle-daemonsets")
	}
	heapProfile(b, "heap")
	return f
}

// settle waits until the reconcile loop has nothing left to decide, the
// event sink has taken every queued event (the registration's presence
// events, at 10,000 nodes, take seconds to store) and the repair loop has
// taken in the lags of the setup's fleet-wide changes: no lag is left to
// take, and a round has finished since (a round every
// desired-repair-after/4: up to 7.5 s). The fleet's agents never report,
// so from 30 s after that the repair loop republishes 1,000 of them per
// round: a series of 1,000 events (3 s) ends before.
func (f *scaleFleet) settle(b *testing.B) {
	deadline := time.Now().Add(5 * time.Minute)
	var taken uint64 // the repair rounds finished when no lag was left, plus one
	for {
		time.Sleep(100 * time.Millisecond)
		f.tc.wake()
		time.Sleep(100 * time.Millisecond)
		f.tc.passMu.Lock()
		pending := f.tc.decider == nil || f.tc.decider.Pending()
		f.tc.passMu.Unlock()
		switch rounds := f.tc.repairRounds.Load(); {
		case pending || len(f.tc.events.queue) > 0 || f.tc.state.lagMarksLeft() > 0:
			taken = 0
		case taken == 0:
			taken = rounds + 1
		case rounds >= taken:
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the controller does not settle")
		}
	}
}

// lagMarksLeft is how many lag marks wait for the repair loop.
func (fs *fleetState) lagMarksLeft() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.lagMarks)
}

// matching counts the nodes daemonset i's selector picks before any node
// has the extra label.
func (f *scaleFleet) matching(i int) int {
	if i == 0 {
		return 0
	}
	switch i % 4 {
	case 2, 0:
		return (f.n + 1) / 2
	}
	return f.n
}

// cpuNow is the CPU time (user and system, all threads, GC included) the
// process has used: on a shared machine wall time includes waiting for a
// core, CPU time is the controller's cost.
func cpuNow(b *testing.B) time.Duration {
	user, sys := cpuSplit(b)
	return user + sys
}

// cpuSplit is cpuNow as user and system time: the system time is mostly
// the kernel's work for the store's fdatasync (two per committed write).
func cpuSplit(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// profile writes a CPU profile of what runs until the returned function is
// called to EDGESET_BENCH_PROFILE-name.pprof, when that variable is set:
// the figures of docs/benchmarks.md say where the time goes from these.
func profile(b *testing.B, name string) func() {
	prefix := os.Getenv("EDGESET_BENCH_PROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-" + name + ".pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// heapProfile writes the live heap to EDGESET_BENCH_PROFILE-name.pprof,
// when that variable is set: what each node costs the controller.
func heapProfile(b *testing.B, name string) {
	prefix := os.Getenv("EDGESET_BENCH_PROFILE")
	if prefix == "" {
		return
	}
	f, err := os.Create(prefix + "-" + name + ".pprof")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkNodeEvent: in a fleet of EDGESET_BENCH_NODES nodes x 20
// daemonsets, one node's label change (it gains or loses daemon-00), from
// the status message to its new desired state published: p50 and p99 of
// the controller's CPU time (user+system, and user alone), and of wall
// time, over 200 events.
//
// The process's CPU time includes the garbage collector's background
// workers, which mark the whole heap (about 1 GB at 100,000 nodes) once
// per cycle: an event that overlaps a cycle is charged part of it. So the
// benchmark also reports the CPU p99 of the events during which no cycle
// ran ("nogc"), how many did overlap one, and a second series of 200
// events with the collector off (GOGC=off from a collected heap): the
// event's own cost, without the collector's.
func BenchmarkNodeEvent(b *testing.B) {
	n := benchNodes(100_000)
	for range b.N {
		f := newScaleFleet(b, n)
		published := make(chan struct{}, 1)
		notify := func(node string) {
			if node != "node-000007" {
				return
			}
			select {
			case published <- struct{}{}:
			default:
			}
		}
		f.onDesired.Store(&notify)
		heapProfile(b, "node-event-heap-before") // their difference (pprof
		stop := profile(b, "node-event")         // -diff_base) is what the
		on := runNodeEvents(b, f, published, 0)  // events allocated
		stop()
		heapProfile(b, "node-event-heap-after")
		runtime.GC()
		gcPercent := debug.SetGCPercent(-1)
		stop = profile(b, "node-event-gcoff")
		off := runNodeEvents(b, f, published, len(on.cpu))
		stop()
		debug.SetGCPercent(gcPercent)
		on.write(b, "node-event")
		off.write(b, "node-event-gcoff")
		on.report(b, "")
		off.report(b, "-gcoff")
		f.tc.stop()
	}
}

// nodeEvents are the measured costs of a series of node events.
type nodeEvents struct {
	start           time.Time
	at              []time.Duration // when each event began, after start
	cpu, user, wall []time.Duration
	allocs          []uint64 // heap bytes allocated while each ran
	// nogc is the CPU time of the events during which (or within 2 ms
	// after which) no collection completed.
	nogc []time.Duration
}

// runNodeEvents sends 200 (EDGESET_BENCH_EVENTS) label changes of
// node-000007 (the first one toggling from offset's parity) and measures
// each until its desired state is published.
func runNodeEvents(b *testing.B, f *scaleFleet, published <-chan struct{}, offset int) nodeEvents {
	events := 200
	if v, err := strconv.Atoi(os.Getenv("EDGESET_BENCH_EVENTS")); err == nil && v > 0 {
		events = v
	}
	ev := nodeEvents{start: time.Now()}
	for i := range events {
		status := scaleStatus(7, (offset+i)%2 == 0)
		gc0, a0 := gcCycles(), heapAllocs()
		u0, s0 := cpuSplit(b)
		w0 := time.Now()
		f.tc.handleMessage(schema.NodeTopic("node-000007", schema.TopicStatus), status)
		select {
		case <-published:
		case <-time.After(30 * time.Second):
			b.Fatalf("event %d: desired state not published", i)
		}
		u1, s1 := cpuSplit(b)
		ev.allocs = append(ev.allocs, heapAllocs()-a0)
		ev.cpu = append(ev.cpu, u1-u0+s1-s0)
		ev.at = append(ev.at, w0.Sub(ev.start))
		ev.user = append(ev.user, u1-u0)
		ev.wall = append(ev.wall, time.Since(w0))
		time.Sleep(2 * time.Millisecond) // let the pass finish its bookkeeping
		// A cycle that ended during the event or in the pause after it
		// overlapped it. (One still marking 2 ms after the event is
		// missed: the GOGC=off series is the exact comparison.)
		if gcCycles() == gc0 {
			ev.nogc = append(ev.nogc, u1-u0+s1-s0)
		}
	}
	return ev
}

// write writes the series, one event a line (its start after the first,
// CPU, user and wall time in microseconds), to
// EDGESET_BENCH_PROFILE-name.txt when that variable is set: where in time
// the tail's events fall.
func (ev nodeEvents) write(b *testing.B, name string) {
	prefix := os.Getenv("EDGESET_BENCH_PROFILE")
	if prefix == "" {
		return
	}
	var out strings.Builder
	out.WriteString("at_ms cpu_us user_us wall_us\n")
	for i := range ev.cpu {
		fmt.Fprintf(&out, "%d %d %d %d\n", ev.at[i].Milliseconds(), ev.cpu[i].Microseconds(), ev.user[i].Microseconds(), ev.wall[i].Microseconds())
	}
	if err := os.WriteFile(prefix+"-"+name+".txt", []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

// report reports the series' p50 and p99, each metric's unit suffixed.
func (ev nodeEvents) report(b *testing.B, suffix string) {
	pct := func(d []time.Duration, p int) float64 {
		if len(d) == 0 {
			return 0
		}
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)*p/100].Microseconds())
	}
	b.ReportMetric(pct(ev.cpu, 50), "p50-cpu-µs"+suffix)
	b.ReportMetric(pct(ev.cpu, 99), "p99-cpu-µs"+suffix)
	b.ReportMetric(pct(ev.user, 50), "p50-user-µs"+suffix)
	b.ReportMetric(pct(ev.user, 99), "p99-user-µs"+suffix)
	b.ReportMetric(pct(ev.wall, 50), "p50-wall-µs"+suffix)
	b.ReportMetric(pct(ev.wall, 99), "p99-wall-µs"+suffix)
	allocs := slices.Clone(ev.allocs)
	slices.Sort(allocs)
	if len(allocs) > 0 {
		b.ReportMetric(float64(allocs[len(allocs)/2]), "p50-alloc-B"+suffix)
	}
	if suffix == "" {
		b.ReportMetric(pct(ev.nogc, 99), "p99-cpu-µs-nogc")
		b.ReportMetric(float64(len(ev.cpu)-len(ev.nogc)), "events-with-gc")
	}
}

// gcCycles is the number of garbage collections completed so far.
func gcCycles() uint64 { return runtimeCount("/gc/cycles/total:gc-cycles") }

// heapAllocs is the bytes allocated on the heap so far.
func heapAllocs() uint64 { return runtimeCount("/gc/heap/allocs:bytes") }

// runtimeCount reads the runtime's cumulative metric name.
func runtimeCount(name string) uint64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkApplyAll: in a fleet of EDGESET_BENCH_NODES nodes x 20
// daemonsets, a 21st daemonset that every node runs is applied: wall and
// CPU time until every node's new desired state is published.
func BenchmarkApplyAll(b *testing.B) {
	n := benchNodes(100_000)
	for range b.N {
		f := newScaleFleet(b, n)
		before := f.published.Load()
		stop := profile(b, "apply-all")
		c0, w0, s0 := cpuNow(b), time.Now(), signingMillis(f.tc)
		f.tc.applyYAML(b, dsManifest("exporter", "1.0", "10%"))
		f.waitPublished(b, before+int64(n))
		stop()
		if benchSigning() {
			b.ReportMetric(signingMillis(f.tc)-s0, "sign-ms")
		}
		b.ReportMetric(float64(time.Since(w0).Milliseconds()), "ms-to-publish-all")
		b.ReportMetric(float64((cpuNow(b) - c0).Milliseconds()), "cpu-ms")
		f.tc.stop()
	}
}

// BenchmarkRollingUpdate: in a fleet of EDGESET_BENCH_NODES nodes x 20
// daemonsets, a new image of a daemonset every node runs rolls out with
// maxUnavailable 10% (10 batches). In-process agents report every instance
// ready the moment their desired state is published, so the agents' own
// update time is zero and the time per batch is the controller's overhead:
// decide, store, publish, and handle the reports.
func BenchmarkRollingUpdate(b *testing.B) {
	n := benchNodes(100_000)
	for range b.N {
		f := newScaleFleet(b, n)
		reports := make(chan string, n)
		instant := func(node string) { reports <- node }
		f.onDesired.Store(&instant)
		done := make(chan struct{})
		go f.reportReady(reports, done)
		f.tc.applyYAML(b, dsManifest("exporter", "1.0", "10%"))
		waitComplete(b, f.tc)
		f.settle(b)
		passes := histogramCount(f.tc.metrics.passDuration)
		stop := profile(b, "rolling-update")
		c0, w0 := cpuNow(b), time.Now()
		f.tc.applyYAML(b, dsManifest("exporter", "2.0", "10%"))
		waitComplete(b, f.tc)
		elapsed, cpu := time.Since(w0), cpuNow(b)-c0
		stop()
		close(done)
		b.ReportMetric(float64(elapsed.Milliseconds()), "ms-rollout")
		b.ReportMetric(float64(elapsed.Milliseconds())/10, "ms/batch")
		b.ReportMetric(float64(cpu.Milliseconds())/10, "cpu-ms/batch")
		b.ReportMetric(histogramCount(f.tc.metrics.passDuration)-passes, "passes")
		f.tc.stop()
	}
}

// reportReady is the fleet's agents: for each node whose desired state was
// published, it reports every instance of that state ready, until done.
func (f *scaleFleet) reportReady(nodes <-chan string, done <-chan struct{}) {
	since := time.Now().Add(-time.Hour)
	for {
		var node string
		select {
		case <-done:
			return
		case node = <-nodes:
		}
		d, _ := f.tc.state.currentOf(node)
		obs := schema.ObservedState{SchemaVersion: schema.WireVersion, Node: node, ObservedGeneration: d.Generation}
		for _, in := range d.Instances {
			obs.Instances = append(obs.Instances, schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision,
				Phase: schema.PhaseRunning, Ready: true, ReadySince: &since})
		}
		p, _ := schema.Encode(obs)
		f.tc.handleMessage(schema.NodeTopic(node, schema.TopicObserved), p)
	}
}

// BenchmarkListNodes is what the dashboard's node table reads when its
// snapshot is stale: ListNodes of a settled fleet of EDGESET_BENCH_NODES
// nodes x 20 daemonsets (make bench-controller sizes), ms per call.
func BenchmarkListNodes(b *testing.B) {
	f := newScaleFleet(b, benchNodes(100_000))
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		nodes, err := f.tc.ListNodes(ctx)
		if err != nil || len(nodes) != f.n {
			b.Fatalf("ListNodes: %d nodes, %v; want %d", len(nodes), err, f.n)
		}
	}
}
