package edgeagent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// processInbox applies the pending messages: the desired state first, so
// the revisions that arrive with it are recognised.
func (a *Agent) processInbox(ctx context.Context) {
	a.inboxMu.Lock()
	msgs := a.inbox
	a.inbox = map[string][]byte{}
	a.inboxMu.Unlock()
	if b, ok := msgs[a.desiredTopic()]; ok {
		delete(msgs, a.desiredTopic())
		if !a.handleDesired(ctx, b) {
			a.requeue(a.desiredTopic(), b)
		}
	}
	for topic, b := range msgs {
		hash, ok := strings.CutPrefix(topic, schema.TopicPrefix+"revisions/")
		if !ok {
			a.log.Debug("ignoring message on unexpected topic", "topic", topic)
			continue
		}
		if !a.handleRevision(ctx, hash, b) {
			a.requeue(topic, b)
		}
	}
}

// requeue puts back a message that could not be persisted, unless a newer
// one for the topic arrived meanwhile; the next pass retries it.
func (a *Agent) requeue(topic string, b []byte) {
	a.inboxMu.Lock()
	defer a.inboxMu.Unlock()
	if _, newer := a.inbox[topic]; !newer {
		a.inbox[topic] = b
	}
}

// handleDesired verifies, persists and adopts a desired state. It returns
// false only when the state was acceptable but could not be persisted.
func (a *Agent) handleDesired(ctx context.Context, b []byte) bool {
	ds, err := decodeDesiredState(b)
	if err != nil {
		a.log.Warn("rejecting desired state", "topic", a.desiredTopic(), "err", err)
		return true
	}
	if ds.Node != a.cfg.NodeName {
		a.log.Warn("rejecting desired state for another node", "topic", a.desiredTopic(), "for", ds.Node)
		return true
	}
	if a.desired != nil && ds.Generation <= a.desired.Generation {
		a.log.Debug("ignoring stale desired state", "generation", ds.Generation, "accepted", a.desired.Generation)
		return true
	}
	if err := a.store.saveDesired(ds); err != nil {
		a.log.Error("cannot persist desired state; will retry", "generation", ds.Generation, "err", err)
		return false
	}
	a.desired = &ds
	a.log.Info("accepted desired state", "generation", ds.Generation, "instances", len(ds.Instances))
	a.updateSubscriptions(ctx)
	return true
}

// handleRevision verifies and caches a revision the desired state is
// waiting for. It returns false only when it could not be persisted.
func (a *Agent) handleRevision(ctx context.Context, hash string, b []byte) bool {
	a.mu.Lock()
	wanted := a.missing[hash]
	a.mu.Unlock()
	if !wanted {
		a.log.Debug("ignoring revision not waited for", "revision", hash)
		return true
	}
	rev, err := decodeRevision(b)
	if err == nil {
		err = a.checkRevision(hash, rev)
	}
	if err != nil {
		a.log.Warn("rejecting revision", "topic", schema.RevisionTopic(hash), "err", err)
		return true
	}
	if err := a.store.saveRevision(rev); err != nil {
		a.log.Error("cannot persist revision; will retry", "revision", hash, "err", err)
		return false
	}
	a.revisions[hash] = rev
	a.log.Info("cached revision", "revision", hash, "daemonSet", rev.DaemonSet)
	a.updateSubscriptions(ctx)
	return true
}

// checkRevision verifies that rev is the one published on hash's topic (its
// template hashes to hash: schema.DecodeRevision checked that) and that a
// desired instance references it. Revisions are content-addressed and shared
// by daemonsets with identical templates, so rev.DaemonSet and rev.Number
// are informational and not compared.
func (a *Agent) checkRevision(hash string, rev schema.Revision) error {
	if rev.Hash != hash {
		return fmt.Errorf("revision on topic %s carries hash %s", schema.RevisionTopic(hash), rev.Hash)
	}
	for _, in := range a.desired.Instances {
		if in.Revision == hash {
			return nil
		}
	}
	return fmt.Errorf("revision %s is not referenced by the desired state", hash)
}

// missingRevisions returns the hashes the desired state references that are
// not cached.
func (a *Agent) missingRevisions() map[string]bool {
	out := map[string]bool{}
	if a.desired == nil {
		return out
	}
	for _, in := range a.desired.Instances {
		if _, ok := a.revisions[in.Revision]; !ok {
			out[in.Revision] = true
		}
	}
	return out
}

// updateSubscriptions recomputes the missing revisions and, when connected,
// subscribes to the new ones and unsubscribes from those no longer needed.
// Failures are left to the next OnConnect, which subscribes to all missing.
func (a *Agent) updateSubscriptions(ctx context.Context) {
	next := a.missingRevisions()
	a.mu.Lock()
	prev := a.missing
	a.missing = next
	connected := a.connected
	a.mu.Unlock()
	if !connected {
		return
	}
	for _, h := range sortedKeys(next) {
		if !prev[h] {
			a.subscribe(ctx, schema.RevisionTopic(h))
		}
	}
	for _, h := range sortedKeys(prev) {
		if !next[h] {
			a.unsubscribe(ctx, schema.RevisionTopic(h))
		}
	}
}

func (a *Agent) subscribe(ctx context.Context, topic string) {
	err := a.connCall(ctx, func(ctx context.Context) error { return a.conn.Subscribe(ctx, topic) })
	if err != nil {
		a.log.Warn("subscribe failed; will retry on reconnect", "topic", topic, "err", err)
	}
}

func (a *Agent) unsubscribe(ctx context.Context, topic string) {
	err := a.connCall(ctx, func(ctx context.Context) error { return a.conn.Unsubscribe(ctx, topic) })
	if err != nil {
		a.log.Debug("unsubscribe failed", "topic", topic, "err", err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
