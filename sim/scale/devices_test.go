package scale

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestShares: the devices split over the processes as evenly as they
// can, with names no two processes share, round-robin over the brokers.
func TestShares(t *testing.T) {
	got := shares(10, 3, []string{"tcp://a:1883", "tcp://b:1883"})
	assert.Equal(t, []deviceShare{
		{nodes: 4, prefix: "sim-0-", brokerURL: "tcp://a:1883"},
		{nodes: 3, prefix: "sim-1-", brokerURL: "tcp://b:1883"},
		{nodes: 3, prefix: "sim-2-", brokerURL: "tcp://a:1883"},
	}, got)
}

// TestSubscribeAtMostOnceReachesEveryDevice: the QoS a run asks of its
// devices holds whether they run in this process or in device processes
// (a fleet in this process once kept QoS 1 on a NATS cluster, and its
// per-device JetStream consumers kept 1,000 devices from registering).
func TestSubscribeAtMostOnceReachesEveryDevice(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name       string
		atMostOnce bool
		wantFlags  []string
	}{
		{"QoS 0", true, []string{"edgeset-sim", "--bench-devices", "--subscribe-qos", "0"}},
		{"QoS 1 (the default)", false, []string{"edgeset-sim", "--bench-devices"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Nodes: 3, Ramp: 10, DeviceCommand: []string{"edgeset-sim", "--bench-devices"}, SubscribeAtMostOnce: tc.atMostOnce}
			local := o.localFleet("tcp://a:1883,tcp://b:1883", secret)
			assert.Equal(t, tc.atMostOnce, local.SubscribeAtMostOnce, "fleet in this process")
			assert.Equal(t, []string{"tcp://a:1883", "tcp://b:1883"}, local.BrokerURLs)
			assert.Equal(t, tc.wantFlags, o.deviceCommand(), "device process command")
			assert.Equal(t, []string{"edgeset-sim", "--bench-devices"}, o.DeviceCommand, "DeviceCommand itself unchanged")
		})
	}
}
