package sim

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
)

const gatewayDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - name: exporter
        image: registry.local/exporter:1.0
        readinessProbe: {httpGet: {path: /ready, port: 9100}, periodSeconds: 1}
        livenessProbe: {tcpSocket: {port: 9100}, periodSeconds: 1}
`

// TestFleetRunsDaemonSet runs a controller with its embedded broker and 20
// simulated devices, all gateways, and expects the controller to report
// the daemonset ready on all 20: its httpGet readiness and tcpSocket
// liveness probes are answered inside the process (dialDaemon).
func TestFleetRunsDaemonSet(t *testing.T) {
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- c.Run(ctx) }()
	<-c.Synced()

	secret, err := ReadFleetSecret(filepath.Join(dir, credential.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := ParseShape([]byte("seed: 7\nlabels:\n  role: {gateway: 1}\n  site: {a: 0.5, b: 0.5}\n  kubernetes.io/arch: {arm64: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := ParseSourceRange("127.0.0.2-127.0.0.5")
	f, err := New(Options{
		BrokerURL: "tcp://" + c.MQTTAddr().String(), Nodes: 20, Tokens: SecretTokens(secret),
		Shape: shape, Ramp: 200, SourceAddrs: src,
	})
	if err != nil {
		t.Fatal(err)
	}
	simDone := make(chan error, 1)
	simCtx, stopSim := context.WithCancel(ctx)
	go func() { simDone <- f.Run(simCtx) }()

	cl := api.NewClient("http://"+c.APIAddr().String(), c.Token(), nil)
	if _, err := cl.Apply(ctx, "test", []byte(gatewayDaemonSet), false); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		dss, err := cl.ListDaemonSets(ctx)
		if err != nil {
			return err
		}
		if len(dss) != 1 || dss[0].Status.NumberReady != 20 {
			return fmt.Errorf("daemonsets %+v, want one with 20 ready", dss)
		}
		return nil
	})
	nodes, err := cl.ListNodes(ctx)
	if err != nil || len(nodes) != 20 {
		t.Fatalf("ListNodes = %d nodes, %v; want 20", len(nodes), err)
	}
	if nodes[0].Labels["site"] == "" || nodes[0].Labels["role"] != "gateway" {
		t.Errorf("node %s labels %v, want role=gateway and a site", nodes[0].Name, nodes[0].Labels)
	}
	if info := nodes[0].Info; info.Arch != "arm64" || info.Runtime != "sim" || info.AgentVersion == "" {
		t.Errorf("node %s info %+v, want the arch of its labels, runtime sim and a version (get nodes -o wide shows them)", nodes[0].Name, info)
	}
	checkfor.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if s := f.Snapshot(); s.Ready != 20 || s.Connected != 20 {
			return fmt.Errorf("fleet sees %d/%d ready, %d connected", s.Ready, s.Instances, s.Connected)
		}
		return nil
	})

	stopSim()
	if err := <-simDone; err != nil {
		t.Errorf("fleet Run: %v", err)
	}
	r := f.Report()
	if r.ConnectSeconds.Count != 20 || r.NeverConnected != 0 || r.Final.BytesOut == 0 {
		t.Errorf("report %+v: want 20 connect times, none missing, traffic counted", r)
	}
	if got := r.Final.DaemonSets["monitoring/exporter"]; len(got) != 1 {
		t.Errorf("report daemonsets %v, want one revision", r.Final.DaemonSets)
	}
	cancel()
	if err := <-ctlDone; err != nil {
		t.Errorf("controller Run: %v", err)
	}
}

func TestFlappingLinkReconnects(t *testing.T) {
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- c.Run(ctx) }()
	defer func() { cancel(); <-ctlDone }()
	secret, err := ReadFleetSecret(filepath.Join(dir, credential.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := ParseShape([]byte("behaviour:\n  flapping: {probability: 1, every: {min: 200ms}, down: {min: 100ms}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{
		BrokerURL: "tcp://" + c.MQTTAddr().String(), Nodes: 2, Tokens: SecretTokens(secret), Shape: shape,
		SourceAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.9")},
		Backoff:     mqttBackoffForTests,
	})
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan error, 1)
	go func() { simDone <- f.Run(simCtx) }()
	checkfor.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		if s := f.Snapshot(); s.Flaps < 4 || s.Reconnects < 2 {
			return fmt.Errorf("flaps %d reconnects %d, want at least 4 and 2", s.Flaps, s.Reconnects)
		}
		return nil
	})
	stopSim()
	if err := <-simDone; err != nil {
		t.Errorf("fleet Run: %v", err)
	}
}

var mqttBackoffForTests = mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}
