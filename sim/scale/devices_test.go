package scale

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestShares: the devices split over the processes as evenly as they
// can, with names no two processes share, each process over every
// broker, starting one further for each process.
func TestShares(t *testing.T) {
	got := shares(10, 3, []string{"tcp://a:1883", "tcp://b:1883"})
	assert.Equal(t, []deviceShare{
		{nodes: 4, prefix: "sim-0-", brokerURLs: "tcp://a:1883,tcp://b:1883"},
		{nodes: 3, prefix: "sim-1-", brokerURLs: "tcp://b:1883,tcp://a:1883"},
		{nodes: 3, prefix: "sim-2-", brokerURLs: "tcp://a:1883,tcp://b:1883"},
	}, got)
}

// TestSharesBalanceBrokers: 50,000 devices in four processes (the
// cluster benchmark's split) land on three brokers in equal parts: each
// process's device i starts on the i-th of its rotated broker list.
func TestSharesBalanceBrokers(t *testing.T) {
	brokers := []string{"tcp://s0:1883", "tcp://s1:1883", "tcp://s2:1883"}
	held := map[string]int{}
	for _, sh := range shares(50000, 4, brokers) {
		list := strings.Split(sh.brokerURLs, ",")
		for i := range sh.nodes {
			held[list[i%len(list)]]++
		}
	}
	for _, b := range brokers {
		if held[b] < 16666 || held[b] > 16668 {
			t.Errorf("broker %s holds %d devices of 50,000, want 16,666 to 16,668 (all: %v)", b, held[b], held)
		}
	}
}

// TestAtMostOnceReachesEveryDevice: the QoS a run asks of its devices'
// subscriptions and publishes holds whether they run in this process or
// in device processes (a fleet in this process once kept QoS 1 on a NATS
// cluster, and its per-device JetStream consumers kept 1,000 devices from
// registering).
func TestAtMostOnceReachesEveryDevice(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	base := []string{"edgeset-sim", "--bench-devices"}
	tests := []struct {
		name               string
		subscribe, publish bool
		wantFlags          []string
	}{
		{"QoS 1 (the default)", false, false, base},
		{"subscriptions at QoS 0", true, false, append(base[:2:2], "--subscribe-qos", "0")},
		{"publishes at QoS 0", false, true, append(base[:2:2], "--publish-qos", "0")},
		{"both at QoS 0", true, true, append(base[:2:2], "--subscribe-qos", "0", "--publish-qos", "0")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Nodes: 3, Ramp: 10, DeviceCommand: base, SubscribeAtMostOnce: tc.subscribe, PublishAtMostOnce: tc.publish}
			local := o.localFleet("tcp://a:1883,tcp://b:1883", secret, nil)
			assert.Equal(t, tc.subscribe, local.SubscribeAtMostOnce, "fleet in this process: subscriptions")
			assert.Equal(t, tc.publish, local.PublishAtMostOnce, "fleet in this process: publishes")
			assert.Equal(t, []string{"tcp://a:1883", "tcp://b:1883"}, local.BrokerURLs)
			assert.Equal(t, tc.wantFlags, o.deviceCommand(), "device process command")
			assert.Equal(t, []string{"edgeset-sim", "--bench-devices"}, o.DeviceCommand, "DeviceCommand itself unchanged")
		})
	}
}
