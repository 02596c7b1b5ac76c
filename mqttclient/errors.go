package mqttclient

import (
	"errors"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// Errors the Client returns; callers test for them with errors.Is.
var (
	// ErrNotConnected: there is no broker connection right now. Callers are
	// level-triggered: they republish everything from OnConnect after the
	// next connection, so they drop the message rather than queue it.
	ErrNotConnected = errors.New("mqtt: not connected")
	// ErrAlreadyRunning: Run was called a second time on one Client.
	ErrAlreadyRunning = errors.New("mqtt: client is already running")
	// ErrTimeout: the broker did not acknowledge within WriteTimeout.
	ErrTimeout = errors.New("mqtt: timed out waiting for the broker")
	// ErrSubscriptionRefused: the broker answered a SUBSCRIBE with failure
	// (0x80), typically because its ACL denies the filter.
	ErrSubscriptionRefused = errors.New("mqtt: subscription refused by the broker")
)

// IsAuthRefused reports whether err is the broker refusing a connection's
// credentials (CONNACK return code 4 or 5).
func IsAuthRefused(err error) bool {
	return errors.Is(err, packets.ErrorRefusedNotAuthorised) || errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword)
}
