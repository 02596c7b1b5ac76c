package broker

import (
	"fmt"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Publish publishes a message from inside the process, as the embedded
// controller does: at QoS 1, bypassing the network and the ACL. It returns
// once the message is queued for every subscriber; a subscriber whose queue
// is full loses it (counted in Stats.Dropped), so the controller's
// publishes are level-based state that it republishes on change.
func (b *Broker) Publish(topic string, payload []byte, retained bool) error {
	if err := b.server.Publish(topic, payload, retained, 1); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// Subscribe delivers every message matching filter to handler, from inside
// the process, and delivers the retained messages matching filter before
// it returns. Unlike a network subscription it never drops: handler is
// called synchronously on the publishing client's goroutine, so it must
// hand the message off without blocking. id identifies the subscription for
// Unsubscribe.
func (b *Broker) Subscribe(filter string, id int, handler func(topic string, payload []byte)) error {
	fn := func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		handler(pk.TopicName, pk.Payload)
	}
	if err := b.server.Subscribe(filter, id, fn); err != nil {
		return fmt.Errorf("subscribe %s: %w", filter, err)
	}
	return nil
}

// Unsubscribe removes the in-process subscription id on filter.
func (b *Broker) Unsubscribe(filter string, id int) error {
	if err := b.server.Unsubscribe(filter, id); err != nil {
		return fmt.Errorf("unsubscribe %s: %w", filter, err)
	}
	return nil
}
