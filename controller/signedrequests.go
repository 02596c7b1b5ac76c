package controller

import (
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// Signed requests (issue 18): with signing on, the controller signs what
// it asks a node to do now as it signs documents (signingTransport), each
// valid for signing.RequestValidity: exec requests and their cancels,
// every input chunk of an interactive session, log requests and their
// cancels. An agent pinning the fleet root runs, feeds or answers only
// those, each exec or log request once (edgeagent/signedrequests.go).

// isRequestKind reports whether kind, the part of a node topic after
// the node's name, is a request topic's.
func isRequestKind(kind string) bool {
	return kind == schema.TopicExecRequest || kind == schema.TopicLogsRequest || strings.HasPrefix(kind, schema.TopicExecInputPrefix)
}

// isRequestTopic reports whether topic is a node's request topic.
func isRequestTopic(topic string) bool {
	rest, ok := strings.CutPrefix(topic, schema.TopicPrefix+"nodes/")
	if !ok {
		return false
	}
	_, kind, _ := strings.Cut(rest, "/")
	return isRequestKind(kind)
}
