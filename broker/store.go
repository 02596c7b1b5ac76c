package broker

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.etcd.io/bbolt"

	"github.com/edgeset/edgeset/internal/boltfile"
)

// StoreFile is the bbolt database of retained messages, in the data
// directory.
const StoreFile = "broker.db"

// retainedBucket holds retained messages keyed by topic.
var retainedBucket = []byte("retained")

// flushInterval bounds how long a retained message waits to be persisted.
const flushInterval = 100 * time.Millisecond

// retainedStore is a mochi hook persisting retained messages, and only them,
// in bbolt. Unlike mochi's bolt hook it does not write clients, subscriptions
// or inflight messages (a write per connect would be an fsync per device in
// a reconnect storm). It writes behind: OnRetainMessage only records the
// latest message of each topic, and one goroutine writes everything pending
// in one transaction every flushInterval and on Stop. A crash loses at most
// flushInterval of retained updates, which the controller repairs: it
// republishes every desired state whenever it (re)connects. Topics
// republished says are not written at all (Options.Republished).
type retainedStore struct {
	mqtt.HookBase
	db          *bbolt.DB
	log         *slog.Logger
	republished func(topic string) bool // never nil
	kick        chan struct{}           // wakes the flusher; buffered 1
	stop        chan struct{}           // closed by Stop
	done        chan struct{}           // closed when the flusher has returned

	mu      sync.Mutex
	pending map[string][]byte // guarded by mu; topic -> encoded message, nil to delete

	closeOnce sync.Once
}

// openRetainedStore opens (creating) the bbolt file at path. A file bbolt
// cannot read is moved aside and replaced by an empty one, with an error
// logged: retained messages are a cache of what the controller republishes
// and devices announce again, and must not keep the controller from
// starting.
func openRetainedStore(path string, republished func(string) bool, log *slog.Logger) (*retainedStore, error) {
	if republished == nil {
		republished = func(string) bool { return false }
	}
	db, setAside, err := boltfile.OpenOrSetAside(path, bbolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open retained store %s: %w", path, err)
	}
	if setAside != "" {
		log.Error("the broker's retained store was damaged: moved it aside and started empty; the controller republishes desired states and devices announce themselves again",
			"file", path, "movedTo", setAside)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(retainedBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("init retained store %s: %w", path, err)
	}
	s := &retainedStore{db: db, log: log, republished: republished, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), pending: map[string][]byte{}}
	go s.flushLoop()
	return s, nil
}

// flushLoop writes pending messages at most every flushInterval, and once
// more when the store stops.
func (s *retainedStore) flushLoop() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			s.flush()
			return
		case <-s.kick:
		}
		s.flush()
		select {
		case <-s.stop:
			s.flush()
			return
		case <-time.After(flushInterval):
		}
	}
}

// flush writes every pending message in one transaction.
func (s *retainedStore) flush() {
	s.mu.Lock()
	batch := s.pending
	s.pending = make(map[string][]byte, len(batch))
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(retainedBucket)
		for topic, v := range batch {
			var err error
			if v == nil {
				err = b.Delete([]byte(topic))
			} else {
				err = b.Put([]byte(topic), v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.Error("persist retained messages", "count", len(batch), "error", err)
	}
}

// record queues topic's latest message (nil: delete) for the next flush.
func (s *retainedStore) record(topic string, v []byte) {
	s.mu.Lock()
	s.pending[topic] = v
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// ID names the hook.
func (s *retainedStore) ID() string { return "edgeset-retained" }

// Provides reports the hook methods implemented.
func (s *retainedStore) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnRetainMessage,
		mqtt.OnRetainedExpired,
		mqtt.StoredRetainedMessages,
	}, []byte{b})
}

// OnRetainMessage stores or (r == -1, an empty retained payload) deletes the
// retained message of pk's topic. A failure is logged: the message stays
// retained in memory, only its persistence is lost.
func (s *retainedStore) OnRetainMessage(_ *mqtt.Client, pk packets.Packet, r int64) {
	if s.republished(pk.TopicName) {
		return
	}
	var err error
	switch r {
	case -1:
		err = s.delete(pk.TopicName)
	case 1:
		err = s.put(pk)
	}
	if err != nil {
		s.log.Error("persist retained message", "topic", pk.TopicName, "error", err)
	}
}

// OnRetainedExpired deletes an expired retained message.
func (s *retainedStore) OnRetainedExpired(topic string) {
	if s.republished(topic) {
		return
	}
	if err := s.delete(topic); err != nil {
		s.log.Error("delete expired retained message", "topic", topic, "error", err)
	}
}

// StoredRetainedMessages returns every persisted retained message; mochi
// calls it once in Serve. It deletes, and does not return, the messages of
// republished topics a broker.db of an earlier version holds: stale the
// moment their publisher republishes, and never updated here again.
func (s *retainedStore) StoredRetainedMessages() ([]storage.Message, error) {
	var out []storage.Message
	var dropped int
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(retainedBucket)
		var stale [][]byte
		err := b.ForEach(func(k, v []byte) error {
			if s.republished(string(k)) {
				stale = append(stale, bytes.Clone(k)) // k lives only until the tree changes
				return nil
			}
			var m storage.Message
			if err := m.UnmarshalBinary(v); err != nil {
				return fmt.Errorf("decode retained message %q: %w", k, err)
			}
			out = append(out, m)
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		dropped = len(stale)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read retained store: %w", err)
	}
	if dropped > 0 {
		s.log.Info("dropped retained messages their publisher republishes from the broker's store", "count", dropped)
	}
	return out, nil
}

// Stop writes what is pending and closes the database; mochi calls it
// from Server.Close. Safe to call more than once.
func (s *retainedStore) Stop() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		err = s.db.Close()
	})
	return err
}

// put writes the retained message pk.
func (s *retainedStore) put(pk packets.Packet) error {
	m := storage.Message{
		ID:          pk.TopicName,
		T:           storage.RetainedKey,
		FixedHeader: pk.FixedHeader,
		TopicName:   pk.TopicName,
		Payload:     pk.Payload,
		Origin:      pk.Origin,
		Created:     pk.Created,
		Properties: storage.MessageProperties{
			PayloadFormat:          pk.Properties.PayloadFormat,
			PayloadFormatFlag:      pk.Properties.PayloadFormatFlag,
			MessageExpiryInterval:  pk.Properties.MessageExpiryInterval,
			ContentType:            pk.Properties.ContentType,
			ResponseTopic:          pk.Properties.ResponseTopic,
			CorrelationData:        pk.Properties.CorrelationData,
			SubscriptionIdentifier: pk.Properties.SubscriptionIdentifier,
			User:                   pk.Properties.User,
		},
	}
	v, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("encode retained message: %w", err)
	}
	s.record(pk.TopicName, v)
	return nil
}

// delete removes the retained message of topic.
func (s *retainedStore) delete(topic string) error {
	s.record(topic, nil)
	return nil
}
