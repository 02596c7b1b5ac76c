package mqttclient

import "sync/atomic"

// Stats is a snapshot of a Client's counters (monotonic since New) and
// gauges.
type Stats struct {
	// Received counts inbound messages handed over by paho.
	Received uint64
	// Coalesced counts state messages overwritten by a newer payload on the
	// same topic before Handler consumed them.
	Coalesced uint64
	// Dropped counts messages discarded because the event buffer was full
	// or MaxPendingTopics was reached.
	Dropped uint64
	// Published counts publishes the broker acknowledged.
	Published uint64
	// PublishErrors counts publishes attempted while connected that failed
	// (timeout, connection loss, context end).
	PublishErrors uint64
	// Connects counts established connections; Reconnects those after the
	// first.
	Connects   uint64
	Reconnects uint64
	// ConnectFailures counts failed connection attempts.
	ConnectFailures uint64
	// Refreshed counts topics whose retained message Refresh asked for.
	Refreshed uint64
	// Pending is the number of messages waiting for Handler.
	Pending int
	// Connected reports whether a connection is up.
	Connected bool
	// Broker is the URL (password masked) of the broker the live
	// connection uses; "" when there is none.
	Broker string
}

// counters are the atomic counters behind Stats.
type counters struct {
	received, coalesced, dropped       atomic.Uint64
	published, publishErrors           atomic.Uint64
	connects, reconnects, connectFails atomic.Uint64
	refreshed                          atomic.Uint64
}
