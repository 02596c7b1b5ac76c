package edgeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// setObserved records the state computed by a pass.
func (a *Agent) setObserved(st schema.ObservedState) {
	a.mu.Lock()
	a.observed = &st
	a.mu.Unlock()
}

// publishObserved publishes the current observed state, retained, when it
// differs from the last one published (always when force is set, as after a
// reconnect). It does nothing while disconnected.
func (a *Agent) publishObserved(ctx context.Context, force bool) error {
	a.pubMu.Lock()
	defer a.pubMu.Unlock()
	a.mu.Lock()
	cur, last, connected := a.observed, a.published, a.connected
	a.mu.Unlock()
	if cur == nil || !connected {
		return nil
	}
	msg := *cur
	msg.Prefetch = a.prefetch.reportedStatus()
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode observed state: %w", err)
	}
	if !force && bytes.Equal(b, last) {
		return nil
	}
	topic := schema.NodeTopic(a.cfg.NodeName, schema.TopicObserved)
	err = a.connCall(ctx, func(ctx context.Context) error { return a.conn.Publish(ctx, topic, b, true) })
	if err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	a.mu.Lock()
	a.published = b
	a.mu.Unlock()
	return nil
}

// event publishes a NodeEvent (not retained). Events are not state: while
// disconnected, or when the publish fails, they are dropped and counted.
func (a *Agent) event(ctx context.Context, typ, reason, daemonSet, msg string) {
	a.log.Info("event", "type", typ, "reason", reason, "daemonSet", daemonSet, "message", msg)
	if !a.isConnected() {
		a.dropped.Add(1)
		return
	}
	ev := schema.NodeEvent{
		SchemaVersion: schema.WireVersion, Node: a.cfg.NodeName, Time: a.now().UTC(),
		Type: typ, Reason: reason, DaemonSet: daemonSet, Message: msg,
	}
	b, err := json.Marshal(ev)
	if err == nil {
		topic := schema.NodeTopic(a.cfg.NodeName, schema.TopicEvents)
		err = a.connCall(ctx, func(ctx context.Context) error { return a.conn.Publish(ctx, topic, b, false) })
	}
	if err != nil {
		a.dropped.Add(1)
		a.log.Debug("event dropped", "reason", reason, "err", err)
	}
}
