package controller

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/store"
)

// eventQueue bounds the events waiting to be stored. Past it, events are
// counted and dropped: they are a record for operators, not state.
const eventQueue = 4096

// Reasons of edgeset_events_dropped_total.
const (
	dropRateLimited = "rate_limited" // a node over its token bucket
	dropNodeCap     = "node_cap"     // a node's oldest stored event, evicted by its newest
	dropQueueFull   = "queue_full"   // the queue to the store was full
	dropStoreError  = "store_error"  // the store refused the batch
)

// eventLimits bound what one node can make the controller store.
type eventLimits struct {
	// perNode bounds the stored events of one node (Event.Source).
	perNode int
	// rate and burst are each node's token bucket, in events a second.
	rate  float64
	burst int
	// seriesWindow is how long a repeat folds into the stored event.
	seriesWindow time.Duration
}

func limitsOf(cfg Config) eventLimits {
	return eventLimits{perNode: cfg.MaxEventsPerNode, rate: float64(cfg.NodeEventRate), burst: cfg.NodeEventBurst, seriesWindow: cfg.EventSeriesWindow}
}

// eventSink stores events in batches off the message and reconcile paths.
//
// One node cannot evict everyone's history: the events its reports cause
// (addFromNode) pass its token bucket first, and it holds at most
// limits.perNode stored events, its newest evicting its oldest. A repeat
// of a stored event (same source, object, type, reason and message) within
// limits.seriesWindow is folded into it, as a Kubernetes event series:
// Count and LastTime of the stored event rise, nothing new is stored.
type eventSink struct {
	store   *store.Store
	log     *slog.Logger
	metrics *metrics
	limits  eventLimits
	now     func() time.Time
	queue   chan store.Event

	mu        sync.Mutex
	buckets   map[string]*tokenBucket // guarded by mu: per node
	lastSweep time.Time               // guarded by mu

	// Owned by Run's goroutine (load and flush): what is stored.
	series     map[seriesKey]seriesEvent // last stored event of each series
	seriesKeys map[uint64]seriesKey      // the series of a stored seq
	perNode    map[string][]uint64       // stored seqs of each node, oldest first
}

// seriesKey identifies the events a series folds together.
type seriesKey struct {
	source, object, typ, reason, message string
}

func keyOf(e store.Event) seriesKey {
	return seriesKey{e.Source, e.Object, e.Type, e.Reason, e.Message}
}

// seriesEvent is a stored event without the fields its series key holds:
// the sink keeps one per open series, for every node.
type seriesEvent struct {
	seq            uint64
	time, lastTime time.Time
	count          int32
}

func seriesEventOf(e store.Event) seriesEvent {
	return seriesEvent{seq: e.Seq, time: e.Time, lastTime: e.LastTime, count: e.Count}
}

// event is the stored event of series k.
func (se seriesEvent) event(k seriesKey) store.Event {
	return store.Event{Seq: se.seq, Time: se.time, Type: k.typ, Reason: k.reason, Object: k.object, Message: k.message,
		Count: se.count, LastTime: se.lastTime, Source: k.source}
}

func newEventSink(st *store.Store, log *slog.Logger, m *metrics, limits eventLimits) *eventSink {
	return &eventSink{
		store: st, log: log, metrics: m, limits: limits, now: time.Now,
		queue:   make(chan store.Event, eventQueue),
		buckets: map[string]*tokenBucket{},
		series:  map[seriesKey]seriesEvent{}, seriesKeys: map[uint64]seriesKey{}, perNode: map[string][]uint64{},
	}
}

// add queues an event of the controller's own, stamped now; it never
// blocks.
func (s *eventSink) add(object, typ, reason, message string) {
	s.enqueue(store.Event{Time: s.now(), Type: typ, Reason: reason, Object: object, Message: message})
}

// addFromNode queues e, caused by a report of node, if node's token bucket
// allows; it never blocks. e is stamped with the controller's clock: a
// device's clock orders nothing.
func (s *eventSink) addFromNode(node string, e store.Event) {
	e.Source = node
	e.Time = s.now()
	if !s.allow(node, e.Time) {
		s.metrics.eventsDropped.WithLabelValues(dropRateLimited).Inc()
		return
	}
	s.enqueue(e)
}

func (s *eventSink) enqueue(e store.Event) {
	select {
	case s.queue <- e:
	default:
		s.metrics.eventsDropped.WithLabelValues(dropQueueFull).Inc()
	}
}

// tokenBucket holds tokens, refilled at a rate up to a burst.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// allow takes a token from node's bucket. Buckets that have refilled are
// forgotten once a minute, so the map holds only the nodes recently
// sending events.
func (s *eventSink) allow(node string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	burst := float64(s.limits.burst)
	if now.Sub(s.lastSweep) > time.Minute {
		for n, b := range s.buckets {
			if b.refill(now, s.limits.rate, burst) >= burst {
				delete(s.buckets, n)
			}
		}
		s.lastSweep = now
	}
	b, ok := s.buckets[node]
	if !ok {
		b = &tokenBucket{tokens: burst, last: now}
		s.buckets[node] = b
	}
	if b.refill(now, s.limits.rate, burst) < 1 {
		return false
	}
	b.tokens--
	return true
}

// refill adds the tokens earned since last and returns how many there are.
func (b *tokenBucket) refill(now time.Time, rate, burst float64) float64 {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
		b.last = now
	}
	return b.tokens
}

// Run stores queued events until ctx ends, then stores what is left.
func (s *eventSink) Run(ctx context.Context) error {
	if err := s.load(); err != nil {
		s.log.Error("read stored events; per-node caps start empty", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			s.flush(s.drain(nil))
			return nil
		case e := <-s.queue:
			s.flush(s.drain([]store.Event{e}))
		}
	}
}

// load learns what is stored: each node's events and the open series.
func (s *eventSink) load() error {
	events, err := s.store.ListEvents(store.EventFilter{})
	if err != nil {
		return err
	}
	for _, e := range events {
		s.remember(e)
	}
	return nil
}

// remember records a stored event.
func (s *eventSink) remember(e store.Event) {
	if e.Source != "" {
		s.perNode[e.Source] = append(s.perNode[e.Source], e.Seq)
	}
	k := keyOf(e)
	if old, ok := s.series[k]; ok {
		delete(s.seriesKeys, old.seq)
	}
	s.series[k] = seriesEventOf(e)
	s.seriesKeys[e.Seq] = k
}

// forget drops what is known of stored event seq.
func (s *eventSink) forget(seq uint64) {
	if k, ok := s.seriesKeys[seq]; ok {
		delete(s.series, k)
		delete(s.seriesKeys, seq)
	}
}

// drain takes every queued event without waiting.
func (s *eventSink) drain(batch []store.Event) []store.Event {
	for {
		select {
		case e := <-s.queue:
			batch = append(batch, e)
		default:
			return batch
		}
	}
}

// flush stores batch in one transaction: repeats fold into their series,
// new events are appended, and a node over its cap loses its oldest.
func (s *eventSink) flush(batch []store.Event) {
	if len(batch) == 0 {
		return
	}
	p := s.plan(batch)
	seqs, trimmed, err := s.store.WriteEvents(p.write)
	if err != nil {
		s.metrics.eventsDropped.WithLabelValues(dropStoreError).Add(float64(len(batch)))
		s.log.Error("store events", "count", len(batch), "err", err)
		return
	}
	s.metrics.eventsFolded.Add(float64(p.folded))
	s.metrics.eventsDropped.WithLabelValues(dropNodeCap).Add(float64(len(p.write.Delete) + p.capped))
	for _, seq := range p.write.Delete {
		s.forget(seq)
	}
	for node, n := range p.evicted {
		s.perNode[node] = slices.Delete(s.perNode[node], 0, n)
	}
	for _, e := range p.write.Update {
		s.series[keyOf(e)] = seriesEventOf(e)
	}
	for i, e := range p.write.Append {
		e.Seq = seqs[i]
		s.remember(e)
	}
	s.trimmed(trimmed)
}

// eventPlan is the write of one batch and what it changes in memory.
type eventPlan struct {
	write   store.EventWrite
	evicted map[string]int // per node, how many of its oldest are deleted
	folded  int            // repeats folded into a series
	capped  int            // new events dropped: their node's cap is full of this batch
}

// plan computes the write of batch.
func (s *eventSink) plan(batch []store.Event) eventPlan {
	p := eventPlan{evicted: map[string]int{}}
	updated := map[uint64]int{}     // seq -> index in p.write.Update
	appended := map[seriesKey]int{} // series -> index in p.write.Append
	appendedBy := map[string]int{}  // node -> events appended
	for _, e := range batch {
		k := keyOf(e)
		if i, ok := appended[k]; ok && s.inWindow(p.write.Append[i], e) {
			fold(&p.write.Append[i], e)
			p.folded++
			continue
		}
		if se, ok := s.series[k]; ok && s.inWindow(se.event(k), e) {
			st := se.event(k)
			if i, ok := updated[st.Seq]; ok {
				fold(&p.write.Update[i], e)
			} else {
				fold(&st, e)
				updated[st.Seq] = len(p.write.Update)
				p.write.Update = append(p.write.Update, st)
			}
			p.folded++
			continue
		}
		if e.Source != "" && s.limits.perNode > 0 {
			stored := s.perNode[e.Source][p.evicted[e.Source]:]
			switch {
			case len(stored)+appendedBy[e.Source] < s.limits.perNode:
			case len(stored) > 0:
				p.write.Delete = append(p.write.Delete, stored[0])
				p.evicted[e.Source]++
			default:
				p.capped++
				continue
			}
			appendedBy[e.Source]++
		}
		appended[k] = len(p.write.Append)
		p.write.Append = append(p.write.Append, e)
	}
	// An event deleted by the cap is not updated.
	p.write.Update = slices.DeleteFunc(p.write.Update, func(e store.Event) bool { return slices.Contains(p.write.Delete, e.Seq) })
	return p
}

// inWindow reports whether e repeats stored within the series window.
func (s *eventSink) inWindow(stored, e store.Event) bool {
	last := stored.LastTime
	if last.IsZero() {
		last = stored.Time
	}
	return e.Time.Sub(last) <= s.limits.seriesWindow
}

// fold adds occurrence e to the series event into.
func fold(into *store.Event, e store.Event) {
	if into.Count == 0 {
		into.Count = 1
	}
	into.Count += max(e.Count, 1)
	into.LastTime = e.Time
}

// trimmed forgets the events the store trimmed: in each pool, every one
// up to its sequence number.
func (s *eventSink) trimmed(t store.Trimmed) {
	if t == (store.Trimmed{}) {
		return
	}
	for node, seqs := range s.perNode {
		i := 0
		for i < len(seqs) && seqs[i] <= t.Node {
			i++
		}
		if i == len(seqs) {
			delete(s.perNode, node)
		} else if i > 0 {
			s.perNode[node] = slices.Delete(seqs, 0, i)
		}
	}
	for stored, k := range s.seriesKeys {
		upTo := t.Own
		if k.source != "" {
			upTo = t.Node
		}
		if stored <= upTo {
			s.forget(stored)
		}
	}
}
