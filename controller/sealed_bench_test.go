package controller

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

// benchUnsealed sends Secrets in the clear (unsealed-secrets-fallback, no
// node keys) with EDGESET_BENCH_UNSEALED=1: the cost before sealing, for
// docs/benchmarks.md.
func benchUnsealed() bool { return os.Getenv("EDGESET_BENCH_UNSEALED") == "1" }

func secretManifest(value string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: api-key, namespace: fleet}
stringData: {token: %q, ca.pem: %q}
`, value, fmt.Sprintf("%0512d", 0))
}

const secretReaderManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: reader, namespace: fleet}
spec:
  selector: {matchLabels: {app: reader}}
  template:
    metadata: {labels: {app: reader}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - name: reader
        image: registry.example.com/edge/reader:1.0
        env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: api-key, key: token}}}]
`

// BenchmarkSecretApply10k: 10,000 registered nodes (EDGESET_BENCH_NODES)
// with a key each run a daemonset that reads a Secret of about 600 bytes;
// the Secret's value changes. Reports the time until every node's new
// Secret message is published (sealed to its key, and signed with
// EDGESET_BENCH_SIGNING=1), and its bytes per node. With
// EDGESET_BENCH_UNSEALED=1 the nodes have no key and the messages go in
// the clear: the figure before sealing.
func BenchmarkSecretApply10k(b *testing.B) {
	n := benchNodes(10000)
	for range b.N {
		f := &benchFleet{tc: startController(b, Config{RepublishRate: 1 << 20, Signing: benchSigning(),
			UnsealedSecretsFallback: benchUnsealed()}), n: n}
		if err := f.tc.embeddedBroker(b).Subscribe(schema.NodeWildcard(schema.TopicDesired), 99, func(string, []byte) { f.published.Add(1) }); err != nil {
			b.Fatal(err)
		}
		var secrets, bytes atomic.Int64
		err := f.tc.embeddedBroker(b).Subscribe(schema.TopicPrefix+"nodes/+/secrets/+", 98, func(_ string, payload []byte) {
			if len(payload) > 0 {
				secrets.Add(1)
				bytes.Add(int64(len(payload)))
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		f.register(b)
		if !benchUnsealed() {
			benchNodeKeys(b, f.tc, n)
		}
		f.tc.applyYAML(b, secretManifest("first")+"---\n"+secretReaderManifest)
		waitCount(b, &secrets, int64(n))
		before, bytesBefore := secrets.Load(), bytes.Load()
		start, s0 := time.Now(), sealingMillis(f.tc)
		f.tc.applyYAML(b, secretManifest("second"))
		waitCount(b, &secrets, before+int64(n))
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-to-publish-all")
		b.ReportMetric(sealingMillis(f.tc)-s0, "seal-ms")
		b.ReportMetric(float64(bytes.Load()-bytesBefore)/float64(n), "secret-B/node")
		f.tc.stop()
	}
}

// sealingMillis is the time tc spent in its sealing transport so far
// (sealing, and passing the other messages through), in milliseconds.
func sealingMillis(tc *testController) float64 {
	st, ok := tc.transport.(*sealingTransport)
	if !ok {
		return 0
	}
	return counterValue(st.seconds) * 1000
}

// benchNodeKeys gives each of the n bench nodes a key, in memory (the
// sealing transport reads nothing else).
func benchNodeKeys(b *testing.B, tc *testController, n int) {
	for i := range n {
		k, err := sealing.GenerateKey()
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("node-%05d", i)
		tc.nodeKeys.set(nodeKey{rec: store.NodeKeyRecord{Node: name, PublicKey: k.Public().String(), KeyID: k.KeyID()}, pub: k.Public()})
	}
}

// waitCount waits until c reaches total.
func waitCount(b *testing.B, c *atomic.Int64, total int64) {
	deadline := time.Now().Add(5 * time.Minute)
	for c.Load() < total {
		if time.Now().After(deadline) {
			b.Fatalf("counted %d, want %d", c.Load(), total)
		}
		time.Sleep(time.Millisecond)
	}
}
