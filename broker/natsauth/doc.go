// Package natsauth admits edgeset devices and the controller to a NATS
// server cluster's MQTT listeners: it is the responder of NATS's auth
// callout (the server sends an authorization request JWT on
// $SYS.REQ.USER.AUTH to the auth users; the responder answers with a user
// JWT it signs, or an error).
//
// The rules are those of the embedded broker (package broker and
// docs/security.md): MQTT username = node name, client ID = node name
// (or ClientID of it: nats-server refuses client IDs containing '.'),
// password = credential.NodeToken; revoked nodes are refused
// (DATA_DIR/revoked-tokens, re-read when it changes); the controller
// (credential.ControllerUsername with credential.ControllerToken) may do
// anything. A node is granted exactly the topics of broker/acl.go,
// expressed as NATS subject permissions (Subject maps a topic). Only MQTT
// connections (plain or over WebSocket) are admitted.
//
// NATS permissions differ from the embedded broker's ACL in one respect:
// a permission that ends in '*' (a node's revisions, ConfigMaps and own
// secrets, readable one hash at a time) also admits the MQTT filter '+'
// at that level, since NATS matches a subscription's wildcard against the
// permission's. A forbidden QoS 1 publish is acknowledged and dropped, and
// the responder decides at connection time only (see Options.UserTTL). See
// docs/scale-out.md.
//
// No node list is kept: a token is checked by recomputing its HMAC, so
// 100,000 nodes cost nothing but their connections.
package natsauth
