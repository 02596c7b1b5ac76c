package controller

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBrokerDropCount(t *testing.T) {
	tests := []struct {
		name   string
		counts []string // payloads of the drop topic, in order
		rise   float64  // edgeset_broker_dropped_total after them
		repair bool     // a republish and a re-read were requested
	}{
		{"zero", []string{"0", "0"}, 0, false},
		{"unchanged", []string{"0", "0", "0"}, 0, false},
		{"first count is taken whole", []string{"7"}, 7, true},
		{"rise", []string{"0", "5"}, 5, true},
		{"rises add up", []string{"0", "5", "12"}, 12, true},
		{"steady after a rise", []string{"3", "3", "3"}, 3, true},
		{"restarted broker counts from zero", []string{"10", "4"}, 14, true},
		{"malformed counts are ignored", []string{"0", "many", "-1", ""}, 0, false},
		{"whitespace", []string{" 2\n"}, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{
				cfg: Config{BrokerDropTopic: DefaultBrokerDropTopic}, log: slog.New(slog.DiscardHandler),
				metrics: newMetrics(), republish: make(chan struct{}, 1), resync: make(chan struct{}, 1),
			}
			for _, p := range tc.counts {
				c.onBrokerDropCount([]byte(p))
			}
			assert.Equal(t, tc.rise, counterValue(c.metrics.brokerDrops))
			assert.Equal(t, tc.repair, len(c.republish) == 1, "republish requested")
			assert.Equal(t, tc.repair, len(c.resync) == 1, "re-read requested")
		})
	}
}

func TestConfigBrokerDropTopic(t *testing.T) {
	tests := []struct {
		value, want string
		valid       bool
	}{
		{"", DefaultBrokerDropTopic, true},
		{"none", "", true},
		{"$SYS/brokers/emqx@host/metrics/messages.dropped", "$SYS/brokers/emqx@host/metrics/messages.dropped", true},
		{"$SYS/+/dropped", "", false},
		{"$SYS/#", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			cfg := Config{BrokerDropTopic: tc.value}
			cfg.ApplyDefaults()
			err := cfg.Validate()
			if !tc.valid {
				assert.ErrorContains(t, err, "broker-drop-topic")
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tc.want, cfg.dropTopic())
		})
	}
}
