package controller

import (
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// BenchmarkSignDesired: signing a batch of desired states as published
// (one instance each), ns/message the per-node cost signing adds to a
// fleet-wide change.
func BenchmarkSignDesired(b *testing.B) {
	priv, err := signing.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	k := &signingKeys{signer: signing.NewSigner(priv), validity: time.Hour}
	m := desiredMessage("node-00042", reconcile.NodeDesired{Generation: 7,
		Instances: []schema.DesiredInstance{{DaemonSet: "fleet/exporter", Revision: "0123456789abcdef0123"}}})
	now := time.Now()
	b.ReportAllocs()
	batch := make([]mqttclient.Message, signing.BatchSize)
	for b.Loop() {
		for i := range batch {
			batch[i] = m
		}
		if err := k.signBatch(batch, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*signing.BatchSize), "ns/message")
}

// signingMillis is the time tc spent signing so far, in milliseconds; 0
// without signing.
func signingMillis(tc *testController) float64 {
	for t := tc.transport; ; {
		if st, ok := t.(*signingTransport); ok {
			return counterValue(st.seconds) * 1000
		}
		w, ok := t.(wrapper)
		if !ok {
			return 0
		}
		t = w.unwrap()
	}
}
