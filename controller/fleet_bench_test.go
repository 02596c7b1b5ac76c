package controller

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/schema"
)

// benchFleet registers n nodes with a controller by handing it their
// retained status and presence in-process, as the embedded broker does, so
// the figures are the controller's own work (MQTT fan-out to real clients
// is measured by `make bench-scale`).
type benchFleet struct {
	tc        *testController
	n         int
	published atomic.Int64 // desired-state messages seen on the broker
	bytes     atomic.Int64 // their payload bytes
}

func newBenchFleet(b *testing.B, n int) *benchFleet {
	f := &benchFleet{tc: startController(b, Config{RepublishRate: 1 << 20, Signing: benchSigning()}), n: n}
	err := f.tc.embeddedBroker(b).Subscribe(schema.NodeWildcard(schema.TopicDesired), 99, func(_ string, payload []byte) {
		f.published.Add(1)
		f.bytes.Add(int64(len(payload)))
	})
	if err != nil {
		b.Fatal(err)
	}
	return f
}

func (f *benchFleet) register(b *testing.B) {
	for i := range f.n {
		name := fmt.Sprintf("node-%05d", i)
		st := gateway(name, map[string]string{"site": fmt.Sprint("site-", i%50)})
		st.SchemaVersion = schema.WireVersion
		status, _ := schema.Encode(st)
		online, _ := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: name, Online: true, Session: 1})
		f.tc.handleMessage(schema.NodeTopic(name, schema.TopicStatus), status)
		f.tc.handleMessage(schema.NodeTopic(name, schema.TopicOnline), online)
	}
	f.waitPublished(b, int64(f.n)) // every new node gets its (empty) desired state
}

// waitPublished waits until at least total desired states were published.
func (f *benchFleet) waitPublished(b *testing.B, total int64) {
	deadline := time.Now().Add(2 * time.Minute)
	for f.published.Load() < total {
		if time.Now().After(deadline) {
			b.Fatalf("published %d desired states, want %d", f.published.Load(), total)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitInstances waits until every node is asked to run k instances.
func (f *benchFleet) waitInstances(b *testing.B, k int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		total := f.tc.state.countNodes(func(reconcile.NodeDesired) bool { return true })
		running := f.tc.state.countNodes(func(d reconcile.NodeDesired) bool { return len(d.Instances) == k })
		if total == f.n && running == total {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nodes not all running %d instances", k)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func dsManifest(name, image, maxUnavailable string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: %s, namespace: fleet}
spec:
  selector: {matchLabels: {app: %s}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: "%s"}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      nodeSelector: {role: gateway}
      tolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]
      containers:
      - name: %s
        image: registry.example.com/edge/%s:%s
        args: ["--listen=:9100", "--collector.textfile.directory=/var/lib/edge"]
        env: [{name: SITE, value: from-node}]
        resources: {limits: {cpu: 100m, memory: 64Mi}}
        volumeMounts: [{name: data, mountPath: /var/lib/edge, readOnly: true}]
      volumes: [{name: data, hostPath: {path: /var/lib/edge}}]
`, name, name, maxUnavailable, name, name, name, image)
}

// BenchmarkFleetApply10k: 10,000 registered nodes, one daemonset applied:
// time until every node's desired state is published, controller heap per
// node, and bytes published per node.
func BenchmarkFleetApply10k(b *testing.B) {
	n := benchNodes(10000)
	for range b.N {
		base := heapAlloc()
		f := newBenchFleet(b, n)
		f.register(b)
		heap := heapAlloc() - base
		before, bytesBefore := f.published.Load(), f.bytes.Load()
		start, s0 := time.Now(), signingMillis(f.tc)
		f.tc.applyYAML(b, dsManifest("exporter", "1.0", "10%"))
		f.waitPublished(b, before+int64(n))
		elapsed := time.Since(start)
		if benchSigning() {
			b.ReportMetric(signingMillis(f.tc)-s0, "sign-ms")
		}
		b.ReportMetric(float64(elapsed.Milliseconds()), "ms-to-publish-all")
		b.ReportMetric(float64(heap)/float64(n), "heap-B/node")
		b.ReportMetric(float64(f.bytes.Load()-bytesBefore)/float64(n), "desired-B/node")
		b.ReportMetric(float64(len(revisionPayload(b, f)))/float64(n), "revision-B/node")
		f.tc.stop()
	}
}

func revisionPayload(b *testing.B, f *benchFleet) []byte {
	for _, rev := range f.tc.state.revisionList() {
		return revisionMessage(rev).Payload
	}
	b.Fatal("no revision")
	return nil
}

// BenchmarkChangeOneOfTen: 1,000 nodes each running ten daemonsets; one
// daemonset's image changes (maxUnavailable 100%, so one batch). Reports
// the bytes published per node for that change, against the size of the
// changed daemonset's template alone.
func BenchmarkChangeOneOfTen(b *testing.B) {
	const n = 1000
	for range b.N {
		f := newBenchFleet(b, n)
		f.register(b)
		for i := range 10 {
			f.tc.applyYAML(b, dsManifest(fmt.Sprintf("daemon-%d", i), "1.0", "100%"))
		}
		f.waitInstances(b, 10)
		time.Sleep(200 * time.Millisecond) // let the last pass finish publishing
		before, bytesBefore := f.published.Load(), f.bytes.Load()
		outBefore := counterValue(f.tc.metrics.bytesOut)
		f.tc.applyYAML(b, dsManifest("daemon-3", "2.0", "100%"))
		f.waitPublished(b, before+n)
		time.Sleep(200 * time.Millisecond)
		desired := float64(f.bytes.Load()-bytesBefore) / n
		total := (counterValue(f.tc.metrics.bytesOut) - outBefore) / n
		e, _ := f.tc.state.entry("fleet/daemon-3")
		tmpl, _ := schema.Encode(e.rec.DaemonSet.Spec.Template)
		b.ReportMetric(desired, "desired-B/node")
		b.ReportMetric(total, "all-B/node")
		b.ReportMetric(float64(len(tmpl)), "template-B")
		f.tc.stop()
	}
}

// benchSigning turns signing on in the benchmarks' controllers with
// EDGESET_BENCH_SIGNING=1, to measure its cost against the same benchmark
// without (docs/benchmarks.md).
func benchSigning() bool { return os.Getenv("EDGESET_BENCH_SIGNING") == "1" }

// benchNodes is def, or EDGESET_BENCH_NODES.
func benchNodes(def int) int {
	if v, err := strconv.Atoi(os.Getenv("EDGESET_BENCH_NODES")); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkRolloutOverhead10k: 10,000 nodes run a daemonset; its image
// changes with maxUnavailable 10% (10 batches). In-process agents report
// the new instance ready the moment they receive their desired state, so
// the agents' own update time is zero and the whole rollout time is the
// controller's overhead: decide, store, publish, and handle the reports.
func BenchmarkRolloutOverhead10k(b *testing.B) {
	n := benchNodes(10000)
	for range b.N {
		f := newBenchFleet(b, n)
		instant := func(topic string, payload []byte) {
			d, err := schema.DecodeDesiredState(payload)
			if err != nil {
				return
			}
			since := time.Now().Add(-time.Hour)
			obs := schema.ObservedState{SchemaVersion: schema.WireVersion, Node: d.Node, ObservedGeneration: d.Generation}
			for _, in := range d.Instances {
				obs.Instances = append(obs.Instances, schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision,
					Phase: schema.PhaseRunning, Ready: true, ReadySince: &since})
			}
			p, _ := schema.Encode(obs)
			go f.tc.handleMessage(schema.NodeTopic(d.Node, schema.TopicObserved), p)
		}
		if err := f.tc.embeddedBroker(b).Subscribe(schema.NodeWildcard(schema.TopicDesired), 98, instant); err != nil {
			b.Fatal(err)
		}
		f.register(b)
		f.tc.applyYAML(b, dsManifest("exporter", "1.0", "10%"))
		waitComplete(b, f.tc)
		passes := histogramCount(f.tc.metrics.passDuration)
		start := time.Now()
		f.tc.applyYAML(b, dsManifest("exporter", "2.0", "10%"))
		waitComplete(b, f.tc)
		elapsed := time.Since(start)
		b.ReportMetric(float64(elapsed.Milliseconds()), "ms-rollout")
		b.ReportMetric(float64(elapsed.Milliseconds())/10, "ms/batch")
		b.ReportMetric(histogramCount(f.tc.metrics.passDuration)-passes, "passes")
		f.tc.stop()
	}
}

// waitComplete waits until the daemonset's rollout of its current revision
// is complete.
func waitComplete(b *testing.B, tc *testController) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v, ok := tc.state.view("fleet/exporter")
		st := v.status
		if ok && st.Rollout.Complete && st.Rollout.Target == v.entry.rec.CurrentRevision {

			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("rollout not complete: %+v", st.Rollout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
