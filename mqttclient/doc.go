// Package mqttclient is edgeset's one MQTT 3.1.1 client, shared by the
// controller and the agent. It wraps github.com/eclipse/paho.mqtt.golang
// v1.5.1 and hides its sharp edges behind one blocking Run(ctx).
//
// # Connection
//
// Run owns the connection. It makes a fresh paho client for every
// connection attempt (paho documents that reusing a client after Disconnect
// is unsafe) with paho's own reconnection off, because paho's backoff has
// no jitter: after a broker restart 10,000 devices would retry in lock-step.
// Instead Run waits Backoff.Delay — full jitter, 1 s doubling to a 2 min
// cap by default — before every retry, and a random FirstConnectJitter
// before the first attempt. Sessions are clean and paho keeps its in-flight
// state in memory (paho v1.5.1's file store panics on I/O errors); nothing
// is lost by that, because edgeset's state is retained on the broker and its
// callers are level-triggered.
//
// After every connection Run subscribes the remembered filters, then calls
// OnConnect on its own goroutine with a context that ends with the
// connection. The controller republishes every node's desired state there,
// the agent its presence, status and observed state. When Run's context
// ends it sends DISCONNECT, so the broker does NOT publish the will: an
// agent that shuts down on purpose publishes its offline presence itself
// first. Run joins every goroutine it started before returning.
//
// # Failover
//
// Options.BrokerURLs lists the nodes of one broker (a cluster whose nodes
// share sessions and retained messages, or a primary and standbys). Each
// connection goes to one node, over its own paho client with that node as
// its only broker. Attempts go round-robin through the list, starting at
// a random node per client (OrderedBrokers: at the first) so a fleet
// spreads over the nodes. A round is one attempt on each node: a failed
// attempt moves to the next node at once, Backoff applies between full
// rounds, so a dead node costs one failed attempt and a client that
// reaches no node backs off as with one broker. A lost connection ends the
// round: the client waits Backoff, jittered so the clients of a dead node
// do not fall on the survivors together, then tries the next node, not the
// one it lost. Stats.Broker and Broker name the live connection's node;
// every connection log names it as "broker".
//
// A node that dies publishes no will: its clients' sessions die with it.
// Presence across a node's death is the reconnection: the agent connects
// to a surviving node and publishes online=true there from OnConnect (see
// docs/protocol.md, Broker failover).
//
// # Inbound messages
//
// Paho calls its message handler on its router goroutine; a handler that
// blocks stalls acknowledgements and keepalive and eventually deadlocks
// paho. Here the paho handler only pushes into an inbox and returns. State
// topics coalesce in it by topic — if Handler is slow, it later sees only
// the newest payload of each topic, which is all a retained,
// level-triggered state topic needs — so the inbox is bounded by the number
// of topics. Topics selected by NoCoalesce (events) queue first-in
// first-out in a bounded buffer whose overflow is dropped and counted. One
// goroutine drains the inbox into Handler. Paho's OrderMatters stays true:
// with it false paho would call the handler on a goroutine per message,
// and an older payload could overwrite a newer one.
//
// # Publishing
//
// Publish sends at QoS 1 and waits for PUBACK. Offline it fails at once
// with ErrNotConnected and queues nothing: callers republish from
// OnConnect. PublishAll keeps a window of publishes in flight for bulk
// fan-out.
package mqttclient
