package controller

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBrokerDropCount(t *testing.T) {
	tests := []struct {
		name      string
		counts    []string // payloads of the drop topic, in order
		rise      float64  // edgeset_broker_dropped_total after them
		repair    bool     // a republish and a re-read were requested
		malformed bool     // a count was rejected as malformed
	}{
		{"zero", []string{"0", "0"}, 0, false, false},
		{"unchanged", []string{"0", "0", "0"}, 0, false, false},
		{"first count is taken whole", []string{"7"}, 7, true, false},
		{"rise", []string{"0", "5"}, 5, true, false},
		{"rises add up", []string{"0", "5", "12"}, 12, true, false},
		{"steady after a rise", []string{"3", "3", "3"}, 3, true, false},
		{"restarted broker counts from zero", []string{"10", "4"}, 14, true, false},
		{"malformed counts are ignored", []string{"0", "many", "-1", ""}, 0, false, true},
		{"whitespace", []string{" 2\n"}, 2, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var republished, rejected bool
			e := &externalTransport{
				dropTopic: DefaultBrokerDropTopic, log: slog.New(slog.DiscardHandler),
				metrics: newMetrics(), resync: make(chan struct{}, 1),
				hooks: transportHooks{
					message:   func(topic string, _ []byte) { t.Errorf("drop counter %s handed to the controller", topic) },
					republish: func() { republished = true },
					reject:    func(string, error) { rejected = true },
				},
			}
			for _, p := range tc.counts {
				e.handle(DefaultBrokerDropTopic, []byte(p))
			}
			assert.Equal(t, tc.rise, counterValue(e.metrics.brokerDrops))
			assert.Equal(t, float64(len(tc.counts)), counterValue(e.metrics.messagesIn), "messages in")
			assert.Equal(t, tc.repair, republished, "republish requested")
			assert.Equal(t, tc.repair, len(e.resync) == 1, "re-read requested")
			assert.Equal(t, tc.malformed, rejected, "malformed count rejected")
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
