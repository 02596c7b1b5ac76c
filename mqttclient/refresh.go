package mqttclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Refresh has the broker send the retained message of each of topics again,
// batch topics at a time, without staying subscribed to them; the messages
// reach Handler like any other. It repairs what a broker dropped on the way
// to this client: a broker that bounds each client's queue (Mosquitto's
// max_queued_messages) drops the overflow of a burst, and a retained
// message it dropped is otherwise not sent again until this client
// subscribes again, when the whole replay goes through the same queue.
//
// After each batch Refresh publishes a marker to fence, a topic this client
// may publish and read and nothing else uses, and waits for it to come
// back. A broker sends a client's messages in order, so by then the batch's
// retained messages have arrived, and the broker never holds more than
// batch of them for this client at once. topics are exact topic names; a
// topic without a retained message sends nothing. Refresh returns
// ErrNotConnected when there is no connection or it drops meanwhile (a
// reconnection subscribes again, which replays everything anyway).
func (c *Client) Refresh(ctx context.Context, topics []string, batch int, fence string) error {
	if batch <= 0 {
		return fmt.Errorf("refresh: batch %d, want at least 1", batch)
	}
	if err := validateTopicName(fence); err != nil {
		return fmt.Errorf("refresh: fence: %w", err)
	}
	for _, t := range topics {
		if err := validateTopicName(t); err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
	}
	pc := c.current()
	if pc == nil {
		return ErrNotConnected
	}
	if err := c.subscribe(ctx, pc, map[string]byte{fence: 1}); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	defer func() { _ = await(context.WithoutCancel(ctx), pc.Unsubscribe(fence), c.deadline()) }()
	for chunk := range slices.Chunk(topics, batch) {
		req := make(map[string]byte, len(chunk))
		for _, t := range chunk {
			req[t] = 1
		}
		if err := c.subscribe(ctx, pc, req); err != nil && !errors.Is(err, ErrSubscriptionRefused) {
			return fmt.Errorf("refresh: %w", err)
		}
		if err := c.awaitFence(ctx, fence); err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
		// Unsubscribe only the topics that are not subscriptions of
		// their own: a filter equal to one of them stays.
		c.mu.Lock()
		drop := slices.DeleteFunc(slices.Clone(chunk), func(t string) bool { _, kept := c.subs[t]; return kept })
		c.mu.Unlock()
		if len(drop) > 0 {
			if err := await(ctx, pc.Unsubscribe(drop...), c.deadline()); err != nil {
				return fmt.Errorf("refresh: unsubscribe: %w", err)
			}
		}
		c.stats.refreshed.Add(uint64(len(chunk)))
	}
	return nil
}

// Fence publishes a unique marker to fence, a topic this client may
// publish and read and nothing else uses, and waits until it comes back:
// a broker sends a client's messages in order, so by then every message
// the broker sent this client before it (a new subscription's retained
// replay) has reached the inbox. Handler may still be working through
// them (Stats.Pending). It returns ErrNotConnected without a connection.
func (c *Client) Fence(ctx context.Context, fence string) error {
	if err := validateTopicName(fence); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	pc := c.current()
	if pc == nil {
		return ErrNotConnected
	}
	if err := c.subscribe(ctx, pc, map[string]byte{fence: 1}); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	defer func() { _ = await(context.WithoutCancel(ctx), pc.Unsubscribe(fence), c.deadline()) }()
	return c.awaitFence(ctx, fence)
}

// awaitFence publishes a unique marker to fence and waits until it comes
// back (or ctx ends, the connection drops, or WriteTimeout passes).
func (c *Client) awaitFence(ctx context.Context, fence string) error {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	marker := hex.EncodeToString(nonce[:])
	back := c.fences.expect(fence, marker)
	defer c.fences.forget(fence, marker)
	if err := c.Publish(ctx, fence, []byte(marker), false); err != nil {
		return fmt.Errorf("publish fence: %w", err)
	}
	ctx, cancel := context.WithDeadline(ctx, c.deadline())
	defer cancel()
	select {
	case <-back:
		return nil
	case <-ctx.Done():
		if c.current() == nil {
			return ErrNotConnected
		}
		return fmt.Errorf("fence %s did not come back: %w", fence, ctx.Err())
	}
}

// fences are the markers Refresh waits for. receive checks them before the
// inbox, so a marker never reaches Handler; while none is awaited that check
// is one atomic load.
type fences struct {
	awaited atomic.Int32 // len(waiting), read without mu
	mu      sync.Mutex
	waiting map[string]chan struct{} // topic + "\x00" + marker
}

func (f *fences) expect(topic, marker string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting == nil {
		f.waiting = make(map[string]chan struct{})
	}
	ch := make(chan struct{})
	f.waiting[topic+"\x00"+marker] = ch
	f.awaited.Store(int32(len(f.waiting)))
	return ch
}

func (f *fences) forget(topic, marker string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.waiting, topic+"\x00"+marker)
	f.awaited.Store(int32(len(f.waiting)))
}

// arrived reports whether topic and payload are an awaited marker, and
// releases its waiter.
func (f *fences) arrived(topic string, payload []byte) bool {
	if f.awaited.Load() == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := topic + "\x00" + string(payload)
	ch, ok := f.waiting[key]
	if ok {
		close(ch)
		delete(f.waiting, key)
		f.awaited.Store(int32(len(f.waiting)))
	}
	return ok
}
