// Package broker is edgeset's embedded MQTT broker: mochi-mqtt v2 with node
// credentials derived from a fleet secret, a deny-by-default per-node ACL,
// optional TLS and mutual TLS, limits sized for large fleets of idle devices,
// and retained messages persisted in bbolt so desired state survives a broker
// restart.
//
// Identities. Every connection authenticates as exactly one identity:
//
//   - a node, with username = node name, client ID = node name and password =
//     credential.NodeToken(secret, node) (package credential); or, on the mutual-TLS listener, with a client
//     certificate whose CommonName is the node name (the username must then be
//     empty or equal to the CommonName);
//   - the controller, with username credential.ControllerUsername and password
//     credential.ControllerToken(secret). It may publish and subscribe to anything.
//
// Anonymous connections, wrong passwords and revoked nodes are refused.
//
// ACL. A node may publish only to its own status, online, observed, events, telemetry and
// logs/response topics, and subscribe only to its own desired and logs/request
// topics, its own secret topics edgeset/v1/nodes/{node}/secrets/{hash}, and
// exact revision and ConfigMap topics edgeset/v1/revisions/{hash} and
// edgeset/v1/configmaps/{hash}, and the fleet's key set edgeset/v1/keys,
// which only the controller writes. Wildcard
// filters from nodes are refused. A node's will message must be allowed by the
// same rules (its own online topic) or the connection is refused.
//
// Connections. Before a connection is served the broker checks it against
// the caps on connections not yet authenticated and on connections per
// source address, and against the back-off of a source that failed too
// many logins; a connection that has not authenticated within
// Limits.ConnectTimeout is closed. Accept errors (file descriptors
// exhausted) are retried with a back-off, never end a listener, and show in
// Health. Register adds the broker's metrics to a Prometheus registry.
// What clients can cause at will is logged through a limiter.
//
// Node names follow schema.ValidNodeName, the one rule every part uses.
//
// Lifecycle. New binds every listener (so Addr is known at once and a bad
// address fails early), Run serves until its context ends and then closes the
// broker, joining its goroutines. Close is safe to call more than once.
//
// docs/security.md in the repository describes the threat model, credential
// handling and every limit.
package broker
