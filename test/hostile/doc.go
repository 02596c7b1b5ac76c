// Package hostile tests signed desired state against a hostile broker: an
// attacker holding the controller's MQTT credential, but not its signing
// key, publishes forged, replayed, downgraded, cross-node and expired
// desired states, revisions and key sets to agents that pin the fleet root,
// on the embedded broker and on a real Mosquitto (skipped without one,
// failed with CI=true or EDGESET_REQUIRE_MOSQUITTO=1, as test/mosquitto
// does).
package hostile
