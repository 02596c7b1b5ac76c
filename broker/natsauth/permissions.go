package natsauth

import (
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/edgeset/edgeset/schema"
)

// subjectReplacer maps MQTT topic characters to NATS subject ones in one
// pass, as nats-server's MQTT support does: a level separator '/' becomes
// the token separator '.', and a '.' inside a level becomes "//".
var subjectReplacer = strings.NewReplacer("/", ".", ".", "//")

// Subject returns the NATS subject nats-server maps the MQTT topic name to,
// for topics without empty levels (every edgeset topic):
// edgeset/v1/nodes/n1.site/desired is edgeset.v1.nodes.n1//site.desired.
func Subject(topic string) string {
	return subjectReplacer.Replace(topic)
}

// nodeWrites are the topics under edgeset/v1/nodes/{node}/ a node may
// publish to (broker/acl.go nodeWrites).
var nodeWrites = []string{
	schema.TopicStatus,
	schema.TopicOnline,
	schema.TopicObserved,
	schema.TopicEvents,
	schema.TopicTelemetry,
	schema.TopicLogsResponse,
	schema.TopicExecResponse,
}

// nodeReads are the topics under edgeset/v1/nodes/{node}/ a node may
// subscribe to (broker/acl.go nodeReads).
var nodeReads = []string{
	schema.TopicDesired,
	schema.TopicLogsRequest,
	schema.TopicExecRequest,
}

// nodePermissions returns the NATS permissions of node: publish to its own
// status, online, observed, events, telemetry, logs/response and exec/response; subscribe to its own
// desired, logs/request and exec/request, to its own secrets and exec
// session inputs, to revisions and to ConfigMaps, each of these one hash
// or session (one subject token) at a time,
// and to the fleet's key set (schema.KeySetTopic).
// Everything else is denied, since an allow list is given for both
// directions. nats-server lets an MQTT client subscribe to its internal
// delivery subjects ($MQTT.sub.> and $MQTT.deliver.pubrel.>) without a
// grant, and stores QoS 1 messages, retained messages and sessions through
// its own internal clients, so no $MQTT subject is granted.
func nodePermissions(node string) jwt.Permissions {
	var p jwt.Permissions
	for _, kind := range nodeWrites {
		p.Pub.Allow.Add(Subject(schema.NodeTopic(node, kind)))
	}
	for _, kind := range nodeReads {
		p.Sub.Allow.Add(Subject(schema.NodeTopic(node, kind)))
	}
	p.Sub.Allow.Add(
		Subject(schema.NodeSecretTopic(node, ""))+"*",
		Subject(schema.ExecInputTopic(node, ""))+"*",
		Subject(schema.RevisionTopic(""))+"*",
		Subject(schema.ConfigMapTopic(""))+"*",
		Subject(schema.KeySetTopic),
	)
	return p
}
