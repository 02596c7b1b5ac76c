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
		{"older session", online, `{"session":20}`, `{"session":10}`, true},
		{"newer session", online, `{"session":20}`, `{"session":30}`, false},
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
