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
	if b, ok := msgs[schema.KeySetTopic]; ok && a.trust != nil {
		delete(msgs, schema.KeySetTopic)
		if !a.handleKeySet(ctx, b) {
			a.requeue(schema.KeySetTopic, b)
		}
	}
	if b, ok := msgs[a.desiredTopic()]; ok {
		delete(msgs, a.desiredTopic())
		if body, ok := a.verified(ctx, a.desiredTopic(), b); ok && !a.handleDesired(ctx, body) {
			a.requeue(a.desiredTopic(), b)
		}
	}
	for topic, b := range msgs {
		if body, ok := a.verified(ctx, topic, b); ok && !a.handleObject(ctx, topic, body) {
			a.requeue(topic, b)
		}
	}
}

// handleObject dispatches a content-addressed message (a revision, a
// ConfigMap or one of this node's Secrets) by its topic. It returns false
// only when the object was acceptable but could not be persisted.
func (a *Agent) handleObject(ctx context.Context, topic string, b []byte) bool {
	if hash, ok := strings.CutPrefix(topic, schema.RevisionTopic("")); ok {
		return a.handleRevision(ctx, hash, b)
	}
	if hash, ok := strings.CutPrefix(topic, schema.ConfigMapTopic("")); ok {
		return a.handleConfigMap(ctx, hash, b)
	}
	if hash, ok := strings.CutPrefix(topic, schema.NodeSecretTopic(a.cfg.NodeName, "")); ok {
		return a.handleSecret(ctx, hash, b)
	}
	a.log.Debug("ignoring message on unexpected topic", "topic", topic)
	return true
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
	a.selfConnected()
	if a.desired != nil && ds.Generation == a.desired.Generation {
		a.reportAgain(ctx)
		return true
	}
	if a.desired != nil && ds.Generation < a.desired.Generation {
		a.log.Debug("ignoring stale desired state", "generation", ds.Generation, "accepted", a.desired.Generation)
		return true
	}
	if err := a.store.saveDesired(ds); err != nil {
		a.log.Error("cannot persist desired state; will retry", "generation", ds.Generation, "err", err)
		return false
	}
	a.desired = &ds
	dropKeys(a.configMaps, refHashes(ds.ConfigMaps))
	dropKeys(a.secrets, refHashes(ds.Secrets))
	a.log.Info("accepted desired state", "generation", ds.Generation, "instances", len(ds.Instances))
	a.updateSubscriptions(ctx)
	return true
}

// reportAgain answers the desired state it already runs, republished (the
// controller republishes every node's desired state on each connection to
// the broker, after a restart too), with its observed state and, through
// Config.republished, its presence. A broker cluster can lose a retained
// message it acknowledged (nats-server acknowledges a QoS 1 publish whose
// store in JetStream timed out, as while a member's death leaves the
// stream without a leader), and the agent publishes its observed state
// only on change: a controller that restarted then reads an older retained
// report, or an old presence, and would hold a node that is done as
// updating, or as offline, for good.
func (a *Agent) reportAgain(ctx context.Context) {
	if err := a.publishObserved(ctx, true); err != nil {
		a.log.Debug("observed state not republished", "err", err)
	}
	if a.cfg.republished != nil {
		a.cfg.republished(ctx)
	}
}

// handleRevision verifies and caches a revision the desired state is
// waiting for. It returns false only when it could not be persisted.
func (a *Agent) handleRevision(ctx context.Context, hash string, b []byte) bool {
	if !a.waitingFor(schema.RevisionTopic(hash)) {
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
	if slices.Contains(a.prefetchRevisions(), hash) {
		return nil
	}
	return fmt.Errorf("revision %s is not referenced by the desired state", hash)
}

// waitingFor reports whether topic is the topic of a missing object.
func (a *Agent) waitingFor(topic string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.missing[topic]
}

// missingTopics returns the topics of what the desired state references
// and is not cached: revisions, ConfigMaps and this node's Secrets.
func (a *Agent) missingTopics() map[string]bool {
	out := map[string]bool{}
	if a.desired == nil {
		return out
	}
	for _, in := range a.desired.Instances {
		if _, ok := a.revisions[in.Revision]; !ok {
			out[schema.RevisionTopic(in.Revision)] = true
		}
	}
	for _, rev := range a.prefetchRevisions() {
		if _, ok := a.revisions[rev]; !ok {
			out[schema.RevisionTopic(rev)] = true
		}
	}
	for _, r := range a.desired.ConfigMaps {
		if _, ok := a.configMaps[r.Hash]; !ok {
			out[schema.ConfigMapTopic(r.Hash)] = true
		}
	}
	for _, r := range a.desired.Secrets {
		if _, ok := a.secrets[r.Hash]; !ok {
			out[schema.NodeSecretTopic(a.cfg.NodeName, r.Hash)] = true
		}
	}
	return out
}

// updateSubscriptions recomputes the missing objects and, when connected,
// subscribes to the new ones and unsubscribes from those no longer needed.
// Failures are left to the next OnConnect, which subscribes to all missing.
func (a *Agent) updateSubscriptions(ctx context.Context) {
	next := a.missingTopics()
	a.mu.Lock()
	prev := a.missing
	a.missing = next
	connected := a.connected
	a.mu.Unlock()
	if !connected {
		return
	}
	for _, topic := range sortedKeys(next) {
		if !prev[topic] {
			a.subscribe(ctx, topic)
		}
	}
	for _, topic := range sortedKeys(prev) {
		if !next[topic] {
			a.unsubscribe(ctx, topic)
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
