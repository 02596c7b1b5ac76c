package natsauth

import (
	"github.com/nats-io/jwt/v2"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// Reasons a request is refused, the label of the denied counter and of the
// log line. Never the token itself.
const (
	ReasonAnonymous   = "anonymous"     // no username or no password
	ReasonBadNodeName = "bad_node_name" // username is not a valid node name
	ReasonBadPassword = "bad_password"  // not the token of this username
	ReasonRevoked     = "revoked"       // node or token fingerprint in the revocation list
	ReasonBadClientID = "bad_client_id" // MQTT client ID other than the node name
	ReasonNotMQTT     = "not_mqtt"      // not an MQTT connection (NATS protocol, NATS WebSocket)
	ReasonBadRequest  = "bad_request"   // not a valid authorization request JWT; not answered
	ReasonTooLarge    = "too_large"     // request larger than MaxRequestBytes; not answered
	ReasonEncrypted   = "encrypted"     // an xkey-encrypted request; not supported, not answered
)

// reasons lists every reason, for the counters.
var reasons = []string{
	ReasonAnonymous, ReasonBadNodeName, ReasonBadPassword, ReasonRevoked,
	ReasonBadClientID, ReasonNotMQTT, ReasonBadRequest, ReasonTooLarge, ReasonEncrypted,
}

// mqttClientType is the ClientInformation.Type of an MQTT connection,
// over TCP or WebSocket.
const mqttClientType = "mqtt"

// verdict is what a request is granted: an identity with its permissions,
// or a refusal reason.
type verdict struct {
	identity    string // node name or credential.ControllerUsername
	permissions jwt.Permissions
	reason      string // non-empty when refused
}

// authorize decides a request from the client's information and CONNECT
// options alone; revoked reports whether a node is revoked, epoch its
// credential epoch (credential.NodeTokenAt). It is pure: no clock, no
// I/O, no logging.
func authorize(secret []byte, revoked func(node string) bool, epoch func(node string) uint64, ci jwt.ClientInformation, co jwt.ConnectOptions) verdict {
	user, password := co.Username, co.Password
	switch {
	case ci.Type != mqttClientType:
		return verdict{identity: user, reason: ReasonNotMQTT}
	case user == "" || password == "":
		return verdict{identity: user, reason: ReasonAnonymous}
	case user == credential.ControllerUsername:
		if !credential.TokenMatches(credential.ControllerToken(secret), []byte(password)) {
			return verdict{identity: user, reason: ReasonBadPassword}
		}
		return verdict{identity: user} // empty permissions: everything
	case !schema.ValidNodeName(user):
		return verdict{identity: user, reason: ReasonBadNodeName}
	case !credential.TokenMatches(credential.NodeTokenAt(secret, user, epoch(user)), []byte(password)):
		return verdict{identity: user, reason: ReasonBadPassword}
	case revoked(user):
		return verdict{identity: user, reason: ReasonRevoked}
	case ci.MQTT != user && ci.MQTT != schema.MQTTClientID(user):
		return verdict{identity: user, reason: ReasonBadClientID}
	}
	return verdict{identity: user, permissions: nodePermissions(user)}
}
