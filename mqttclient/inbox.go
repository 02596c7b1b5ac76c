package mqttclient

import "sync"

// compactAfter is how many consumed slots the queue may hold before pop
// moves the live items to the front.
const compactAfter = 1024

// inboxItem is one pending delivery. A state item carries no payload: the
// payload lives in inbox.latest so a newer message replaces it in place.
type inboxItem struct {
	topic   string
	payload []byte // events only
	event   bool
}

// inbox decouples paho's router goroutine from Handler. push never blocks:
// state topics coalesce (latest payload per topic wins, so the memory is
// bounded by the number of distinct topics), event topics queue FIFO in a
// bounded buffer and overflow is dropped. Deliveries keep the order in which
// each topic first became pending.
type inbox struct {
	maxTopics int
	maxEvents int
	stats     *counters
	// stale, when set, reports that an incoming payload is older than the
	// one pending for its topic, which it then does not replace.
	stale func(topic string, pending, incoming []byte) bool
	// ready holds a token whenever the queue may be non-empty.
	ready chan struct{}

	mu sync.Mutex
	// Guarded by mu.
	items  []inboxItem       // items[head:] are pending, in arrival order
	head   int               // index of the next item to pop
	latest map[string][]byte // pending payload of each queued state topic
	events int               // queued event items
}

// newInbox returns an empty inbox with the given bounds.
func newInbox(maxTopics, maxEvents int, stats *counters) *inbox {
	return &inbox{
		maxTopics: maxTopics,
		maxEvents: maxEvents,
		stats:     stats,
		ready:     make(chan struct{}, 1),
		latest:    make(map[string][]byte),
	}
}

// push enqueues a message without blocking. event selects FIFO delivery.
func (in *inbox) push(topic string, payload []byte, event bool) {
	in.stats.received.Add(1)
	in.mu.Lock()
	queued := in.pushLocked(topic, payload, event)
	in.mu.Unlock()
	if queued {
		select {
		case in.ready <- struct{}{}:
		default:
		}
	}
}

// pushLocked enqueues or coalesces the message and reports whether a new
// item joined the queue.
func (in *inbox) pushLocked(topic string, payload []byte, event bool) bool {
	if event {
		if in.events >= in.maxEvents {
			in.stats.dropped.Add(1)
			return false
		}
		in.events++
		in.items = append(in.items, inboxItem{topic: topic, payload: payload, event: true})
		return true
	}
	if old, pending := in.latest[topic]; pending {
		if in.stale == nil || !in.stale(topic, old, payload) {
			in.latest[topic] = payload
		}
		in.stats.coalesced.Add(1)
		return false
	}
	if len(in.latest) >= in.maxTopics {
		in.stats.dropped.Add(1)
		return false
	}
	in.latest[topic] = payload
	in.items = append(in.items, inboxItem{topic: topic})
	return true
}

// pop removes and returns the oldest pending delivery; ok is false when
// the inbox is empty.
func (in *inbox) pop() (topic string, payload []byte, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.head == len(in.items) {
		return "", nil, false
	}
	item := in.items[in.head]
	in.items[in.head] = inboxItem{} // release the payload
	in.head++
	in.compactLocked()
	if item.event {
		in.events--
		return item.topic, item.payload, true
	}
	payload = in.latest[item.topic]
	delete(in.latest, item.topic)
	return item.topic, payload, true
}

// compactLocked reclaims consumed slots: all of them when the queue is
// empty, otherwise once they outnumber the live items.
func (in *inbox) compactLocked() {
	live := len(in.items) - in.head
	switch {
	case live == 0:
		in.items, in.head = in.items[:0], 0
	case in.head >= compactAfter && in.head > live:
		n := copy(in.items, in.items[in.head:])
		clear(in.items[n:])
		in.items, in.head = in.items[:n], 0
	}
}

// len returns the number of pending deliveries.
func (in *inbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.items) - in.head
}
