package interop

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// Burst shape: more nodes than the broker's per-client queue, each
// announcing several statuses in a row.
const (
	burstNodes    = 3000
	burstRounds   = 3
	burstWorkers  = 16
	burstLabel    = "burst-seq"
	burstConverge = 2 * time.Minute
)

// dropNotice is what Mosquitto 2.0 logs when it starts dropping a client's
// outgoing QoS 1 messages because its queue is full.
const dropNotice = "Outgoing messages are being dropped"

// TestStatusBurstConverges: more nodes than the broker's per-client queue
// each publish their retained status several times in a row, with a
// changing label, while the controller is busy placing a daemonset on every
// one of them and publishing their desired states. The controller must end
// with every node's latest status, as read through its API.
//
// "deep queue" is the broker configuration docs/mosquitto.md recommends
// (max_queued_messages 100000): nothing is dropped and the controller's
// coalescing inbox absorbs the burst. In "small queue" the fleet joins,
// then Mosquitto restarts with max_inflight_messages 2 and
// max_queued_messages 10 and drops most messages to the controller, the
// replay of its subscriptions included; the rise of Mosquitto's drop
// counter makes the controller re-read every known node's retained state a
// few topics at a time, so it converges anyway.
func TestStatusBurstConverges(t *testing.T) {
	tests := []struct {
		name                string
		maxInflight, queued int
	}{
		{"deep queue", mosquitto.DefaultMaxInflightMessages, mosquitto.DefaultMaxQueuedMessages},
		{"small queue", 2, 10},
	}
	nodes := burstNodeNames(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, nodes, mosquitto.Config{})
			if tc.queued < mosquitto.DefaultMaxQueuedMessages {
				// The fleet has joined; then the broker restarts with a
				// queue too small for it, and the controller's replay
				// of every node's retained state overflows it.
				publishBurst(t, f, nodes, 1, burstWorkers)
				checkfor.Eventually(t, burstConverge, 500*time.Millisecond, func() error { return f.expectLatestStatus(nodes, 1) })
				f.broker.Resize(tc.maxInflight, tc.queued)
			}
			f.apply(exporterManifest("registry.local/exporter:1.0"))
			start := time.Now()
			publishBurst(t, f, nodes, burstRounds, burstWorkers)
			t.Logf("published %d statuses from %d nodes in %s; mosquitto dropped messages to a client: %t",
				len(nodes)*burstRounds, len(nodes), time.Since(start), strings.Contains(f.broker.Log(), dropNotice))
			checkfor.Eventually(t, burstConverge, 500*time.Millisecond, func() error { return f.expectLatestStatus(nodes, burstRounds) })
			t.Logf("controller converged on %d nodes %s after the burst started (%s)", len(nodes), time.Since(start), f.messagesIn())
			if tc.queued < mosquitto.DefaultMaxQueuedMessages {
				// The convergence is the re-read's doing: without it
				// (broker-drop-topic none, broker-resync-interval -1s)
				// about two thirds of the nodes stay stale.
				for _, name := range []string{"edgeset_broker_dropped_total", "edgeset_broker_resyncs_total"} {
					if v := f.metric(name); v <= 0 {
						t.Errorf("%s = %v after Mosquitto dropped messages, want > 0", name, v)
					}
				}
			}
		})
	}
}

// burstNodeNames returns the burst's node names; EDGESET_BURST_NODES
// overrides their number (for a quick local run).
func burstNodeNames(t *testing.T) []string {
	n := burstNodes
	if s := os.Getenv("EDGESET_BURST_NODES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("EDGESET_BURST_NODES=%q: want a positive integer", s)
		}
	}
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("burst-%04d", i)
	}
	return nodes
}

// expectLatestStatus checks through the API that the controller knows every
// node with burstLabel at its last value, rounds.
func (f *fleet) expectLatestStatus(nodes []string, rounds int) error {
	list, err := f.api.ListNodes(context.Background())
	if err != nil {
		return err
	}
	got := make(map[string]string, len(list))
	for _, nd := range list {
		got[nd.Name] = nd.Labels[burstLabel]
	}
	want := strconv.Itoa(rounds)
	var stale []string
	for _, name := range nodes {
		if v, ok := got[name]; !ok || v != want {
			stale = append(stale, fmt.Sprintf("%s=%q (known %t)", name, v, ok))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d nodes lack their latest status %s=%s, e.g. %v; mosquitto dropped messages to a client: %t; %s",
		len(stale), len(nodes), burstLabel, want, stale[:min(5, len(stale))], strings.Contains(f.broker.Log(), dropNotice), f.messagesIn())
}

// metric reads one unlabelled metric from the controller's /metrics, or -1
// when it cannot.
func (f *fleet) metric(name string) float64 {
	resp, err := http.Get("http://" + f.ctl.APIAddr().String() + "/metrics")
	if err != nil {
		f.t.Logf("metrics: %v", err)
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return x
			}
		}
	}
	return -1
}

// messagesIn reads the controller's count of handled MQTT messages from
// its /metrics, for diagnostics.
func (f *fleet) messagesIn() string {
	resp, err := http.Get("http://" + f.ctl.APIAddr().String() + "/metrics")
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "edgeset_mqtt_messages_in_total ") {
			return line
		}
	}
	return fmt.Sprintf("metrics: no edgeset_mqtt_messages_in_total (status %s)", resp.Status)
}

// publishBurst connects as each node (its own user and token, as the ACL
// requires) and publishes its retained status rounds times, pipelined, with
// burstLabel counting 1..rounds, so the last value is rounds. A bounded
// pool of workers connections keeps goroutines within the race detector's
// limit.
func publishBurst(t *testing.T, f *fleet, nodes []string, rounds, workers int) {
	t.Helper()
	work := make(chan string)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for node := range work {
				if err := publishStatuses(f, node, rounds); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, node := range nodes {
		work <- node
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// publishStatuses publishes node's status rounds times on one connection
// and waits for every PUBACK.
func publishStatuses(f *fleet, node string, rounds int) error {
	opts := mqtt.NewClientOptions().
		AddBroker(f.broker.URL()).
		SetClientID(node).
		SetUsername(node).
		SetPassword(credential.NodeToken(f.secret, node)).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(10 * time.Second)
	c := mqtt.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("%s: connect: %v", node, tok.Error())
	}
	defer c.Disconnect(250)
	topic := schema.NodeTopic(node, schema.TopicStatus)
	toks := make([]mqtt.Token, 0, rounds)
	for r := 1; r <= rounds; r++ {
		payload, err := schema.Encode(schema.NodeStatus{
			SchemaVersion: schema.WireVersion,
			Node:          node,
			Labels:        map[string]string{"role": "gateway", burstLabel: strconv.Itoa(r)},
			Conditions:    []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
		})
		if err != nil {
			return err
		}
		toks = append(toks, c.Publish(topic, 1, true, payload))
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			return fmt.Errorf("%s: publish round %d: not acknowledged: %v", node, i+1, tok.Error())
		}
	}
	return nil
}
