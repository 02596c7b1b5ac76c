package edgeagent

import (
	"context"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// telemetryLoop measures the device every TelemetryInterval and publishes
// the telemetry when it changed meaningfully since the last one published
// on this connection (TelemetryChanged), when none was yet, or when the
// last is TelemetryMaxInterval old.
func (n *Node) telemetryLoop(ctx context.Context) error {
	t := time.NewTicker(n.opts.TelemetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if !n.client.Connected() {
				continue
			}
			if err := n.publishTelemetry(ctx); err != nil {
				n.log.Debug("publish telemetry", "err", err)
			}
		}
	}
}

func (n *Node) publishTelemetry(ctx context.Context) error {
	m := n.opts.Telemetry(ctx)
	m.SchemaVersion, m.Node = schema.WireVersion, n.opts.Agent.NodeName
	n.mu.Lock()
	last := n.lastTelemetry
	n.mu.Unlock()
	if last != nil && !TelemetryChanged(*last, m) && m.Time.Sub(last.Time) < n.opts.TelemetryMaxInterval {
		return nil
	}
	return n.publishKind(ctx, schema.TopicTelemetry, m, true, func() { n.lastTelemetry = &m })
}
