// Package interop holds edgeset's end-to-end interoperability tests: the
// real controller and real agents (over the in-memory fake runtime) talking
// through a real Mosquitto with edgeset's password file and per-node ACL,
// and bursts of node status through a broker with a small per-client queue.
//
// The tests skip when Mosquitto is not installed and fail instead under
// CI=true or EDGESET_REQUIRE_MOSQUITTO=1 (see test/mosquitto). Set
// EDGESET_TEST_LOG=1 to see the controller's and agents' logs.
package interop
