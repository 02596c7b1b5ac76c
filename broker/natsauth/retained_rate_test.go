package natsauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
	"github.com/edgeset/edgeset/mqttclient"
)

// retainedStream is the stream nats-server keeps MQTT retained messages
// in: one replicated store per retained publish.
const retainedStream = "$MQTT_rmsgs"

// TestRetainedPublishThroughput measures how many retained publishes the
// three-server cluster stores per second, the ceiling of every state
// change of an edgeset fleet on NATS (a desired state, a report, a
// presence is one each): EDGESET_NATS_RETAINED_PUBLISHES=N publishes N
// retained messages of 300 bytes, to distinct topics, with the
// controller's PublishAll, in three ways, and logs each rate. A
// subscriber on another server counts the deliveries; the test asserts
// only that every message is delivered.
//
//   - QoS 1 from one connection (the controller's fan-out);
//   - QoS 1 from three connections, one per server, each a third;
//   - QoS 0 from one connection on a server other than the retained
//     stream's leader, the subscriber on the leader's server: nats-server
//     stores a retained message synchronously in the publisher's read
//     loop, and at QoS 0 it does not flush the route the previous
//     message's delivery is waiting on first, which here is also the
//     route the store request takes (docs/scale-out.md, "Hazards").
func TestRetainedPublishThroughput(t *testing.T) {
	v := os.Getenv("EDGESET_NATS_RETAINED_PUBLISHES")
	if v == "" {
		t.Skip("set EDGESET_NATS_RETAINED_PUBLISHES=N to measure the cluster's retained publishes per second")
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "EDGESET_NATS_RETAINED_PUBLISHES")
	require.Positive(t, n, "EDGESET_NATS_RETAINED_PUBLISHES")
	f := startFleet(t, nil)
	leader := f.cluster.StreamLeader(t, natstest.Account, retainedStream)
	other := (leader + 1) % len(f.cluster.Procs)
	cases := []struct {
		name       string
		atMostOnce bool
		publishers []int // the server of each publishing connection
		subscriber int
	}{
		{"QoS 1, one connection", false, []int{other}, leader},
		{"QoS 1, three connections", false, []int{0, 1, 2}, leader},
		{"QoS 0, one connection, delivery and store on one route", true, []int{other}, leader},
	}
	for round, tc := range cases {
		prefix := fmt.Sprintf("bench/r%d/", round)
		var got atomic.Int64
		f.mqttClient(t, tc.subscriber, fmt.Sprintf("sub-%d", round), false, prefix+"+", func() { got.Add(1) })
		shards := make([][]mqttclient.Message, len(tc.publishers))
		for i := range n {
			k := i % len(shards)
			shards[k] = append(shards[k], mqttclient.Message{Topic: fmt.Sprintf("%s%06d", prefix, i), Payload: make([]byte, 300), Retained: true})
		}
		f.cluster.WaitInterest(t, natstest.Account, natsauth.Subject(shards[0][0].Topic), tc.publishers...)
		var publishers []*mqttclient.Client
		for k, server := range tc.publishers {
			publishers = append(publishers, f.mqttClient(t, server, fmt.Sprintf("pub-%d-%d", round, k), tc.atMostOnce, "", nil))
		}
		start := time.Now()
		var wg sync.WaitGroup
		for k, c := range publishers {
			wg.Go(func() { require.NoError(t, c.PublishAll(context.Background(), shards[k])) })
		}
		wg.Wait()
		written := time.Since(start)
		checkfor.Eventually(t, 10*time.Minute, 5*time.Millisecond, func() error {
			if d := got.Load(); d < int64(n) {
				return fmt.Errorf("%s: %d of %d delivered", tc.name, d, n)
			}
			return nil
		})
		all := time.Since(start)
		t.Logf("%s (retained stream leader s%d, subscriber on s%d): %d retained publishes sent in %s, all delivered in %s: %.0f per second",
			tc.name, leader, tc.subscriber, n, written.Round(time.Millisecond), all.Round(time.Millisecond), float64(n)/all.Seconds())
	}
	for round, atMostOnce := range []bool{false, true} {
		f.burstsOfThree(t, fmt.Sprintf("bursts/q%d/", round), n/3, atMostOnce, leader)
	}
}

// burstsOfThree connects clients (nodes' share: 20 at a time, on the
// servers other than the retained stream's leader) that each publish
// three retained messages back to back, as an agent announces itself
// (presence, status, observed state), at QoS 0 with atMostOnce; a
// subscriber on the leader's server counts the deliveries. It logs the
// time until all were delivered and how many of the retained copies a
// later subscriber finds (a store that timed out is delivered but not
// kept).
func (f *fleet) burstsOfThree(t *testing.T, prefix string, clients int, atMostOnce bool, leader int) {
	t.Helper()
	var got atomic.Int64
	f.mqttClient(t, leader, prefix+"sub", false, prefix+"+", func() { got.Add(1) })
	var others []int
	for i := range f.cluster.Procs {
		if i != leader {
			others = append(others, i)
		}
	}
	f.cluster.WaitInterest(t, natstest.Account, natsauth.Subject(prefix+"x"), others...)
	start := time.Now()
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for i := range clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c := f.mqttClient(t, others[i%len(others)], fmt.Sprintf("%sc%d", prefix, i), atMostOnce, "", nil)
			var burst []mqttclient.Message
			for k := range 3 {
				burst = append(burst, mqttclient.Message{Topic: fmt.Sprintf("%s%06d-%d", prefix, i, k), Payload: make([]byte, 300), Retained: true})
			}
			require.NoError(t, c.PublishAll(context.Background(), burst))
		})
	}
	wg.Wait()
	checkfor.Eventually(t, 10*time.Minute, 5*time.Millisecond, func() error {
		if d := got.Load(); d < int64(3*clients) {
			return fmt.Errorf("%d of %d delivered", d, 3*clients)
		}
		return nil
	})
	all := time.Since(start)
	// A later subscriber gets the retained copies, then the fence, a live
	// message its server delivers after the replay.
	var kept atomic.Int64
	var fenced atomic.Bool
	fence := prefix + "zz-fence"
	f.mqttClientFunc(t, leader, prefix+"later", prefix+"+", func(topic string) {
		if topic == fence {
			fenced.Store(true)
			return
		}
		kept.Add(1)
	})
	fencer := f.mqttClient(t, leader, prefix+"fencer", false, "", nil)
	checkfor.Eventually(t, waitFor, 50*time.Millisecond, func() error {
		if err := fencer.Publish(context.Background(), fence, []byte("f"), false); err != nil {
			return err
		}
		if !fenced.Load() {
			return fmt.Errorf("no fence yet")
		}
		return nil
	})
	t.Logf("QoS %d, %d connections publishing 3 retained messages back to back: all %d delivered in %s; %d retained copies kept",
		map[bool]int{false: 1, true: 0}[atMostOnce], clients, 3*clients, all.Round(time.Millisecond), kept.Load())
}

// mqttClient runs an mqttclient as the controller on server until the test
// ends: publishing at QoS 0 with atMostOnce, subscribed at QoS 0 to filter
// (when set) with each message counted by received.
func (f *fleet) mqttClient(t *testing.T, server int, id string, atMostOnce bool, filter string, received func()) *mqttclient.Client {
	t.Helper()
	return f.runClient(t, server, id, atMostOnce, filter, func(string) {
		if received != nil {
			received()
		}
	})
}

// mqttClientFunc is mqttClient publishing at QoS 1, handing each
// message's topic to received.
func (f *fleet) mqttClientFunc(t *testing.T, server int, id, filter string, received func(topic string)) *mqttclient.Client {
	t.Helper()
	return f.runClient(t, server, id, false, filter, received)
}

func (f *fleet) runClient(t *testing.T, server int, id string, atMostOnce bool, filter string, received func(topic string)) *mqttclient.Client {
	t.Helper()
	connected := make(chan struct{}, 1)
	opts := mqttclient.Options{BrokerURLs: f.cluster.MQTTURLs()[server : server+1], ClientID: id,
		Username: credential.ControllerUsername, Password: credential.ControllerToken(f.secret),
		FirstConnectJitter: -1, PublishAtMostOnce: atMostOnce, Logger: slog.New(slog.DiscardHandler),
		OnConnect: func(context.Context) {
			select {
			case connected <- struct{}{}:
			default:
			}
		}}
	if filter != "" {
		opts.Subscriptions = []mqttclient.Subscription{{Filter: filter, QoS: 0}}
		opts.Handler = func(topic string, _ []byte) { received(topic) }
		opts.NoCoalesce = func(string) bool { return true } // count every message
		opts.EventBuffer = 1 << 20
	}
	c, err := mqttclient.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	select {
	case <-connected:
	case <-time.After(waitFor):
		t.Fatalf("%s: no connection to server %d within %s", id, server, waitFor)
	}
	return c
}
