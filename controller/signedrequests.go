package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
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

// unanswered is the error of a request on node's topic of kind that the
// node did not answer within waited: when the node reported refusing a
// request on that topic meanwhile (a signed request it could not verify:
// an undelegated key, a clock far ahead), that refusal; otherwise the
// node's silence.
func (c *Controller) unanswered(node, kind string, waited time.Duration) error {
	since := c.now().Add(-waited - refusalSlack)
	if msg := c.refusals.lastOn(node, schema.NodeTopic(node, kind), since); msg != "" {
		return fmt.Errorf("%w: node %s did not answer: it reported: %s", api.ErrTimeout, node, msg)
	}
	return fmt.Errorf("%w: node %s did not answer; is it online?", api.ErrTimeout, node)
}

// refusalSlack is how long before a request was sent a refusal the node
// reported may still be its (the clocks of the wait and of the event).
const refusalSlack = time.Second

// lastOn returns the message of node's last reported refusal when it was
// of a message on topic and reported at or after since; "" otherwise. A
// refusal event's message starts "refused TOPIC:" (edgeagent's
// countRefusal).
func (r *refusals) lastOn(node, topic string, since time.Time) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.byNode[node]
	if n == nil || n.Last.Before(since) || !strings.HasPrefix(n.LastMessage, "refused "+topic+":") {
		return ""
	}
	return n.LastMessage
}
