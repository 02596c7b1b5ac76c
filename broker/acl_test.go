package broker

import (
	"testing"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

func TestAllowed(t *testing.T) {
	const read, write = false, true
	own := func(kind string) string { return schema.NodeTopic("node-a", kind) }
	other := func(kind string) string { return schema.NodeTopic("node-b", kind) }
	tests := []struct {
		name     string
		identity string
		topic    string
		write    bool
		want     bool
	}{
		{"publish own status", "node-a", own(schema.TopicStatus), write, true},
		{"publish own online", "node-a", own(schema.TopicOnline), write, true},
		{"publish own observed", "node-a", own(schema.TopicObserved), write, true},
		{"publish own events", "node-a", own(schema.TopicEvents), write, true},
		{"publish own telemetry", "node-a", own(schema.TopicTelemetry), write, true},
		{"publish other telemetry", "node-a", other(schema.TopicTelemetry), write, false},
		{"subscribe own telemetry", "node-a", own(schema.TopicTelemetry), read, false},
		{"publish own logs response", "node-a", own("logs/response"), write, true},
		{"publish own desired", "node-a", own(schema.TopicDesired), write, false},
		{"publish own logs request", "node-a", own("logs/request"), write, false},
		{"publish other status", "node-a", other(schema.TopicStatus), write, false},
		{"publish other observed", "node-a", other(schema.TopicObserved), write, false},
		{"publish revision", "node-a", schema.RevisionTopic("abc"), write, false},
		{"publish unknown kind", "node-a", own("secrets"), write, false},
		{"publish below own kind", "node-a", own(schema.TopicStatus) + "/x", write, false},
		{"subscribe own desired", "node-a", own(schema.TopicDesired), read, true},
		{"subscribe own logs request", "node-a", own("logs/request"), read, true},
		{"subscribe own status", "node-a", own(schema.TopicStatus), read, false},
		{"subscribe other desired", "node-a", other(schema.TopicDesired), read, false},
		{"subscribe other logs request", "node-a", other(schema.TopicLogsRequest), read, false},
		{"publish other logs response", "node-a", other(schema.TopicLogsResponse), write, false},
		{"subscribe revision", "node-a", schema.RevisionTopic("0123456789abcdef0123"), read, true},
		{"subscribe revision wildcard", "node-a", "edgeset/v1/revisions/+", read, false},
		{"subscribe revision multi-level", "node-a", "edgeset/v1/revisions/#", read, false},
		{"subscribe below revision", "node-a", schema.RevisionTopic("abc") + "/x", read, false},
		{"subscribe empty revision", "node-a", "edgeset/v1/revisions/", read, false},
		{"subscribe hash", "node-a", "#", read, false},
		{"subscribe edgeset hash", "node-a", "edgeset/#", read, false},
		{"subscribe all desired", "node-a", schema.NodeWildcard(schema.TopicDesired), read, false},
		{"subscribe own plus", "node-a", "edgeset/v1/nodes/node-a/+", read, false},
		{"subscribe own hash", "node-a", "edgeset/v1/nodes/node-a/#", read, false},
		{"subscribe shared other desired", "node-a", "$share/g/" + other(schema.TopicDesired), read, false},
		{"subscribe sys", "node-a", "$SYS/#", read, false},
		{"prefix node name", "node", own(schema.TopicDesired), read, false},
		{"invalid identity", "node-a/+", own(schema.TopicDesired), read, false},
		{"empty identity", "", schema.RevisionTopic("abc"), read, false},
		{"subscribe configmap", "node-a", schema.ConfigMapTopic("0123456789abcdef0123"), read, true},
		{"subscribe configmap wildcard", "node-a", "edgeset/v1/configmaps/+", read, false},
		{"subscribe configmap multi-level", "node-a", "edgeset/v1/configmaps/#", read, false},
		{"subscribe below configmap", "node-a", schema.ConfigMapTopic("abc") + "/x", read, false},
		{"subscribe empty configmap", "node-a", schema.ConfigMapTopic(""), read, false},
		{"publish configmap", "node-a", schema.ConfigMapTopic("abc"), write, false},
		{"subscribe own secret", "node-a", schema.NodeSecretTopic("node-a", "0123456789abcdef0123"), read, true},
		{"subscribe other secret", "node-a", schema.NodeSecretTopic("node-b", "0123456789abcdef0123"), read, false},
		{"subscribe own secrets plus", "node-a", "edgeset/v1/nodes/node-a/secrets/+", read, false},
		{"subscribe own secrets hash", "node-a", "edgeset/v1/nodes/node-a/secrets/#", read, false},
		{"subscribe other secrets plus", "node-a", "edgeset/v1/nodes/node-b/secrets/+", read, false},
		{"subscribe other secrets hash", "node-a", "edgeset/v1/nodes/node-b/secrets/#", read, false},
		{"subscribe all nodes secret", "node-a", "edgeset/v1/nodes/+/secrets/0123456789abcdef0123", read, false},
		{"subscribe empty secret", "node-a", schema.NodeSecretTopic("node-a", ""), read, false},
		{"subscribe below own secret", "node-a", schema.NodeSecretTopic("node-a", "abc") + "/x", read, false},
		{"subscribe own secrets kind", "node-a", own("secrets"), read, false},
		{"publish own secret", "node-a", schema.NodeSecretTopic("node-a", "abc"), write, false},
		{"controller publishes secret", credential.ControllerUsername, schema.NodeSecretTopic("node-a", "abc"), write, true},
		{"controller publishes desired", credential.ControllerUsername, own(schema.TopicDesired), write, true},
		{"controller subscribes hash", credential.ControllerUsername, "#", read, true},
		{"controller publishes revision", credential.ControllerUsername, schema.RevisionTopic("abc"), write, true},
		{"subscribe own exec input", "node-a", schema.ExecInputTopic("node-a", "5e0c_x-1"), read, true},
		{"subscribe other exec input", "node-a", schema.ExecInputTopic("node-b", "5e0c"), read, false},
		{"subscribe own exec inputs plus", "node-a", "edgeset/v1/nodes/node-a/exec/input/+", read, false},
		{"subscribe own exec inputs hash", "node-a", "edgeset/v1/nodes/node-a/exec/input/#", read, false},
		{"subscribe all nodes exec input", "node-a", "edgeset/v1/nodes/+/exec/input/5e0c", read, false},
		{"subscribe below own exec input", "node-a", schema.ExecInputTopic("node-a", "5e0c") + "/x", read, false},
		{"subscribe empty exec input", "node-a", schema.ExecInputTopic("node-a", ""), read, false},
		{"publish own exec input", "node-a", schema.ExecInputTopic("node-a", "5e0c"), write, false},
		{"controller publishes exec input", credential.ControllerUsername, schema.ExecInputTopic("node-a", "5e0c"), write, true},
		{"subscribe key set", "node-a", schema.KeySetTopic, read, true},
		{"publish key set", "node-a", schema.KeySetTopic, write, false},
		{"subscribe below key set", "node-a", schema.KeySetTopic + "/x", read, false},
		{"controller publishes key set", credential.ControllerUsername, schema.KeySetTopic, write, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowed(tc.identity, tc.topic, tc.write); got != tc.want {
				t.Errorf("allowed(%q, %q, write=%v) = %v, want %v", tc.identity, tc.topic, tc.write, got, tc.want)
			}
		})
	}
}
