package controller

import (
	"testing"

	"github.com/edgeset/edgeset/schema"
)

func TestStaleState(t *testing.T) {
	obs := schema.NodeTopic("gw", schema.TopicObserved)
	online := schema.NodeTopic("gw", schema.TopicOnline)
	tests := []struct {
		name              string
		topic             string
		pending, incoming string
		stale             bool
	}{
		{"older observed", obs, `{"observedGeneration":5}`, `{"observedGeneration":4}`, true},
		{"same observed", obs, `{"observedGeneration":5}`, `{"observedGeneration":5}`, false},
		{"newer observed", obs, `{"observedGeneration":5}`, `{"observedGeneration":6}`, false},
		// Sessions are the device's clock: they order nothing. The last
		// presence to arrive wins, except a will of another session
		// arriving after an online (a late will of the connection the
		// online replaced) and an online of a session after its will.
		{"lower session online after a will (device clock behind)", online, `{"online":false,"session":20}`, `{"online":true,"session":10}`, false},
		{"higher session online after a will", online, `{"online":false,"session":20}`, `{"online":true,"session":30}`, false},
		{"late will of another session after an online", online, `{"online":true,"session":10}`, `{"online":false,"session":20}`, true},
		{"will of the pending online's session", online, `{"online":true,"session":20}`, `{"online":false,"session":20}`, false},
		{"online of a session after its will", online, `{"online":false,"session":20}`, `{"online":true,"session":20}`, true},
		{"garbage incoming", obs, `{"observedGeneration":5}`, `nope`, false},
		{"status is never stale", schema.NodeTopic("gw", schema.TopicStatus), `{"observedGeneration":5}`, `{"observedGeneration":4}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := staleState(tc.topic, []byte(tc.pending), []byte(tc.incoming)); got != tc.stale {
				t.Fatalf("staleState = %t, want %t", got, tc.stale)
			}
		})
	}
}
