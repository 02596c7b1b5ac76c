package broker

import (
	"bytes"
	"log/slog"
	"slices"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/edgeset/edgeset/credential"
)

// hook is the mochi hook enforcing authentication and the ACL and counting
// dropped messages. It keeps no state of its own: a client's identity is
// its username, set to the certificate CommonName on the mutual-TLS listener
// before the client becomes visible to other goroutines.
type hook struct {
	mqtt.HookBase
	b *Broker
}

// ID names the hook.
func (h *hook) ID() string { return "edgeset-auth" }

// Provides reports the hook methods implemented.
func (h *hook) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnConnectAuthenticate,
		mqtt.OnACLCheck,
		mqtt.OnSubscribe,
		mqtt.OnPublishDropped,
		mqtt.OnPacketIDExhausted,
		mqtt.OnQosDropped,
	}, []byte{b})
}

// OnConnectAuthenticate admits a client whose credentials, client ID and will
// topic pass authenticate, and ends its connect timeout. A refusal is
// counted against its source address.
func (h *hook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	identity, err := h.b.authenticate(peerCommonName(cl.Net.Conn), pk)
	if err != nil {
		h.b.authFailed(cl.Net.Conn, pk, err)
		return false
	}
	if !h.b.conns.authenticated(cl.Net.Conn) {
		return false // the connect timeout closed it meanwhile
	}
	cl.Properties.Username = []byte(identity)
	if identity == credential.ControllerUsername {
		cl.State.Inflight.ResetReceiveQuota(controllerReceiveQuota)
	}
	return true
}

// OnACLCheck applies allowed to the client's identity. On the delivery path
// it also reports a message about to be dropped because the subscriber's
// inflight store is full, which mochi v2.7.9 counts but has no hook for.
func (h *hook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	ok := allowed(string(cl.Properties.Username), topic, write)
	if ok && !write && cl.State.Inflight.Len() >= int(h.b.opts.Limits.MaxInflight) {
		h.b.notifyDrop(cl.ID, topic)
	}
	return ok
}

// OnSubscribe refuses the filters that would take a node client past
// Limits.MaxSubscriptions: mochi refuses an empty filter as invalid
// (SUBACK failure), before the ACL and without storing it. A filter the
// client already holds, or names twice in one packet, counts once.
func (h *hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if string(cl.Properties.Username) == credential.ControllerUsername {
		return pk
	}
	held := cl.State.Subscriptions.Len()
	limit := h.b.opts.Limits.MaxSubscriptions
	var filters []packets.Subscription // copied on the first refusal
	refused := 0
	counted := map[string]bool{}
	for i, sub := range pk.Filters {
		if _, ok := cl.State.Subscriptions.Get(sub.Filter); ok || counted[sub.Filter] {
			continue
		}
		if held < limit {
			held++
			counted[sub.Filter] = true
			continue
		}
		if filters == nil {
			filters = slices.Clone(pk.Filters)
		}
		filters[i].Filter = ""
		refused++
	}
	if refused > 0 {
		h.b.limited.Log("subscriptions/"+cl.ID, slog.LevelWarn, "subscriptions refused: client holds its limit of filters", "client", cl.ID,
			"username", string(cl.Properties.Username), "refused", refused, "limit", limit)
		pk.Filters = filters
	}
	return pk
}

// OnPublishDropped counts a message dropped because the client's outbound
// queue was full.
func (h *hook) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	h.b.drop(cl.ID, pk.TopicName)
}

// OnPacketIDExhausted counts a message dropped because the client had no
// free packet identifier.
func (h *hook) OnPacketIDExhausted(cl *mqtt.Client, pk packets.Packet) {
	h.b.idExhausted.Add(1)
	h.b.drop(cl.ID, pk.TopicName)
}

// OnQosDropped counts an inflight message abandoned (expired or refused by
// the client). Mochi reports an expired message twice, the second time as a
// bare packet ID; only the publish itself is counted.
func (h *hook) OnQosDropped(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Type == packets.Publish {
		h.b.drop(cl.ID, pk.TopicName)
	}
}
