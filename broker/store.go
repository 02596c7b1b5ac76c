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
)

// retainedBucket holds retained messages keyed by topic.
var retainedBucket = []byte("retained")

// retainedStore is a mochi hook persisting retained messages, and only them,
// in bbolt. Unlike mochi's bolt hook it does not write clients, subscriptions
// or inflight messages (a write per connect would be an fsync per device in
// a reconnect storm), and it groups concurrent writes into one transaction
// with bbolt's Batch.
type retainedStore struct {
	mqtt.HookBase
	db        *bbolt.DB
	log       *slog.Logger
	closeOnce sync.Once
}

// openRetainedStore opens (creating) the bbolt file at path.
func openRetainedStore(path string, log *slog.Logger) (*retainedStore, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open retained store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(retainedBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("init retained store %s: %w", path, err)
	}
	return &retainedStore{db: db, log: log}, nil
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
	if err := s.delete(topic); err != nil {
		s.log.Error("delete expired retained message", "topic", topic, "error", err)
	}
}

// StoredRetainedMessages returns every persisted retained message; mochi
// calls it once in Serve.
func (s *retainedStore) StoredRetainedMessages() ([]storage.Message, error) {
	var out []storage.Message
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(retainedBucket).ForEach(func(k, v []byte) error {
			var m storage.Message
			if err := m.UnmarshalBinary(v); err != nil {
				return fmt.Errorf("decode retained message %q: %w", k, err)
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read retained store: %w", err)
	}
	return out, nil
}

// Stop closes the database; mochi calls it from Server.Close. Safe to call
// more than once.
func (s *retainedStore) Stop() error {
	var err error
	s.closeOnce.Do(func() { err = s.db.Close() })
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
	return s.db.Batch(func(tx *bbolt.Tx) error {
		return tx.Bucket(retainedBucket).Put([]byte(pk.TopicName), v)
	})
}

// delete removes the retained message of topic.
func (s *retainedStore) delete(topic string) error {
	return s.db.Batch(func(tx *bbolt.Tx) error {
		return tx.Bucket(retainedBucket).Delete([]byte(topic))
	})
}
