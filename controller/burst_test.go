package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// TestStatusBurstWithSlowConsumer: more nodes than the embedded broker's
// per-client queue (broker.DefaultLimits' pending writes) each publish their
// retained status three times over real MQTT connections, while the
// controller's consumer is held up; the controller ends with every node's
// latest status. Its in-process subscription has no queue to overflow: a
// slow consumer slows the publishers down instead of losing their messages.
func TestStatusBurstWithSlowConsumer(t *testing.T) {
	const nodes, rounds = 600, 3
	tc := startController(t, Config{})
	var hold sync.WaitGroup
	hold.Add(1)
	go func() { // the slow consumer: hold the controller's state lock in bursts
		defer hold.Done()
		for range 20 {
			tc.state.mu.Lock()
			time.Sleep(50 * time.Millisecond)
			tc.state.mu.Unlock()

			time.Sleep(10 * time.Millisecond)
		}
	}()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(32)
	for i := range nodes {
		g.Go(func() error { return publishStatuses(ctx, tc, fmt.Sprintf("burst-%03d", i), rounds) })
	}
	require.NoError(t, g.Wait())
	hold.Wait()
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		list, err := tc.api.ListNodes(context.Background())
		if err != nil {
			return err
		}
		stale := 0
		for _, n := range list {
			if n.Labels["seq"] != fmt.Sprint(rounds) {
				stale++
			}
		}
		if len(list) != nodes || stale > 0 {
			return fmt.Errorf("%d nodes known, %d with a stale status", len(list), stale)
		}
		return nil
	})
	require.Zero(t, tc.embeddedBroker(t).Stats().Dropped, "no message dropped")
}

// publishStatuses connects as node and publishes rounds statuses, the last
// with label seq=rounds.
func publishStatuses(ctx context.Context, tc *testController, node string, rounds int) error {
	c, err := mqttclient.New(mqttclient.Options{BrokerURL: tc.brokerURL(), ClientID: node, Username: node,
		Password: credential.NodeToken(tc.secret, node), FirstConnectJitter: time.Millisecond})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	for i := 1; i <= rounds; i++ {
		st := gateway(node, map[string]string{"seq": fmt.Sprint(i)})
		st.SchemaVersion = schema.WireVersion
		payload, _ := schema.Encode(st)
		for {
			err := c.Publish(ctx, schema.NodeTopic(node, schema.TopicStatus), payload, true)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond) // not yet connected
		}
	}
	return nil
}
