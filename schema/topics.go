package schema

import "strings"

// TopicPrefix is the root of every v1 topic.
const TopicPrefix = "edgeset/v1/"

// Per-node topic kinds: edgeset/v1/nodes/{node}/{kind}.
const (
	TopicStatus   = "status"   // agent to controller, retained: NodeStatus
	TopicOnline   = "online"   // agent (and its will) to controller, retained: Presence
	TopicDesired  = "desired"  // controller to agent, retained: DesiredState
	TopicObserved = "observed" // agent to controller, retained: ObservedState
	TopicEvents   = "events"   // agent to controller, not retained: NodeEvent
	// TopicTelemetry: agent to controller, retained: Telemetry.
	TopicTelemetry = "telemetry"

	TopicLogsRequest  = "logs/request"  // controller to agent, not retained: LogRequest
	TopicLogsResponse = "logs/response" // agent to controller, not retained: LogChunk

	TopicExecRequest  = "exec/request"  // controller to agent, not retained: ExecRequest
	TopicExecResponse = "exec/response" // agent to controller, not retained: ExecChunk
)

// NodeTopic returns the topic of the given kind for node.
func NodeTopic(node, kind string) string {
	return TopicPrefix + "nodes/" + node + "/" + kind
}

// NodeWildcard returns the subscription filter for kind on every node.
func NodeWildcard(kind string) string {
	return TopicPrefix + "nodes/+/" + kind
}

// FenceTopic is the controller's own topic for ordering markers: it
// publishes a marker there and waits for it to come back when re-reading
// retained state from an external broker. Nodes may neither read nor write
// it.
const FenceTopic = TopicPrefix + "controller/fence"

// KeySetTopic carries the fleet's key set, retained: the root-signed list
// of the controller's online signing keys (package signing). Every node
// may read it; only the controller writes it.
const KeySetTopic = TopicPrefix + "keys"

// ConfigMapTopic returns the retained topic of the ConfigMap version with
// hash; every node may read it.
func ConfigMapTopic(hash string) string {
	return TopicPrefix + "configmaps/" + hash
}

// TopicSecretsPrefix is the kind prefix of a node's secret topics:
// edgeset/v1/nodes/{node}/secrets/{hash}.
const TopicSecretsPrefix = "secrets/"

// NodeSecretTopic returns the retained topic of the Secret version with
// hash for node; only that node may read it.
func NodeSecretTopic(node, hash string) string {
	return NodeTopic(node, TopicSecretsPrefix+hash)
}

// RevisionTopic returns the retained topic of the revision with hash.
func RevisionTopic(hash string) string {
	return TopicPrefix + "revisions/" + hash
}

// twoLevelKinds are the node topic kinds of two levels.
var twoLevelKinds = map[string]bool{
	TopicLogsRequest: true, TopicLogsResponse: true, TopicExecRequest: true, TopicExecResponse: true,
}

// ParseNodeTopic splits edgeset/v1/nodes/{node}/{kind}. ok is false for any
// other topic. A kind is one topic level, except the logs and exec kinds.
func ParseNodeTopic(topic string) (node, kind string, ok bool) {
	rest, found := strings.CutPrefix(topic, TopicPrefix+"nodes/")
	if !found {
		return "", "", false
	}
	node, kind, found = strings.Cut(rest, "/")
	if !found || node == "" || kind == "" ||
		(strings.Contains(kind, "/") && !twoLevelKinds[kind]) {
		return "", "", false
	}
	return node, kind, true
}
