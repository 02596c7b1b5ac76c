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
