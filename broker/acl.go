package broker

import (
	"strings"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// nodeWrites are the kinds a node may publish under its own
// edgeset/v1/nodes/{node}/.
var nodeWrites = map[string]bool{
	schema.TopicStatus:       true,
	schema.TopicOnline:       true,
	schema.TopicObserved:     true,
	schema.TopicEvents:       true,
	schema.TopicTelemetry:    true,
	schema.TopicLogsResponse: true,
	schema.TopicExecResponse: true,
}

// nodeReads are the kinds a node may subscribe to under its own
// edgeset/v1/nodes/{node}/.
var nodeReads = map[string]bool{
	schema.TopicDesired:     true,
	schema.TopicLogsRequest: true,
	schema.TopicExecRequest: true,
}

// revisionPrefix starts every revision topic, configMapPrefix every
// ConfigMap topic (schema.ConfigMapTopic): content-addressed public
// objects that any node may read one at a time.
var (
	revisionPrefix  = schema.RevisionTopic("")
	configMapPrefix = schema.ConfigMapTopic("")
)

// allowed is the ACL: whether identity may publish (write) or subscribe to /
// receive (read) topic, which for a subscription is the filter. It denies by
// default. The controller may do anything; a node only what the package
// documentation lists, and never with a wildcard, since no allowed topic
// contains '+' or '#' (node names cannot either).
func allowed(identity, topic string, write bool) bool {
	if identity == credential.ControllerUsername {
		return true
	}
	if !schema.ValidNodeName(identity) {
		return false
	}
	if topic == schema.KeySetTopic {
		return !write // the fleet's key set: every node reads it
	}
	for _, prefix := range []string{revisionPrefix, configMapPrefix} {
		if hash, ok := strings.CutPrefix(topic, prefix); ok {
			return !write && validLevel(hash)
		}
	}
	kind, ok := strings.CutPrefix(topic, schema.TopicPrefix+"nodes/"+identity+"/")
	if !ok {
		return false
	}
	if write {
		return nodeWrites[kind]
	}
	if hash, ok := strings.CutPrefix(kind, schema.TopicSecretsPrefix); ok {
		// The node's own secrets (schema.NodeSecretTopic), one at a time.
		return validLevel(hash)
	}
	if id, ok := strings.CutPrefix(kind, schema.TopicExecInputPrefix); ok {
		// The input of one of its own exec sessions (schema.ExecInputTopic).
		return schema.ValidStreamID(id)
	}
	return nodeReads[kind]
}

// validLevel reports whether s is one non-empty topic level without
// wildcards.
func validLevel(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/+#\x00")
}
