package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/edgeset/edgeset/controller/store"
)

// eventQueue bounds the events waiting to be stored. Past it, events are
// counted and dropped: they are a record for operators, not state.
const eventQueue = 4096

// eventSink stores events in batches off the message and reconcile paths.
type eventSink struct {
	store   *store.Store
	log     *slog.Logger
	metrics *metrics
	queue   chan store.Event
}

func newEventSink(st *store.Store, log *slog.Logger, m *metrics) *eventSink {
	return &eventSink{store: st, log: log, metrics: m, queue: make(chan store.Event, eventQueue)}
}

// add queues an event stamped now; it never blocks.
func (s *eventSink) add(object, typ, reason, message string) {
	s.addEvent(store.Event{Time: time.Now(), Type: typ, Reason: reason, Object: object, Message: message})
}

// addEvent queues e; it never blocks.
func (s *eventSink) addEvent(e store.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	select {
	case s.queue <- e:
	default:
		s.metrics.eventsDropped.Inc()
	}
}

// Run stores queued events until ctx ends, then stores what is left.
func (s *eventSink) Run(ctx context.Context) error {
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

func (s *eventSink) flush(batch []store.Event) {
	if len(batch) == 0 {
		return
	}
	if _, err := s.store.AppendEvents(batch); err != nil {
		s.log.Error("store events", "count", len(batch), "err", err)
	}
}
