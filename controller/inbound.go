package controller

import (
	"fmt"
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// handleMessage takes one message from the fleet. It is called on the
// embedded broker's client goroutines or the broker client's consumer; it
// decodes, updates in-memory state under a short lock and wakes the
// reconcile loop, and never blocks on I/O. A malformed message is counted,
// logged and dropped: it changes nothing.
func (c *Controller) handleMessage(topic string, payload []byte) {
	c.metrics.messagesIn.Inc()
	node, kind, ok := schema.ParseNodeTopic(topic)
	if !ok {
		c.reject("", topic, fmt.Errorf("not an edgeset node topic"))
		return
	}
	if len(payload) == 0 {
		return // a cleared retained message, e.g. after a node deletion
	}
	var err error
	switch kind {
	case schema.TopicStatus:
		err = c.onStatus(node, payload)
	case schema.TopicOnline:
		err = c.onPresence(node, payload)
	case schema.TopicObserved:
		err = c.onObserved(node, payload)
	case schema.TopicEvents:
		err = c.onNodeEvent(node, payload)
	case schema.TopicLogsResponse:
		err = c.onLogChunk(node, payload)
	case schema.TopicExecResponse:
		err = c.onExecChunk(node, payload)
	case schema.TopicTelemetry:
		err = c.onTelemetry(node, payload)
	default:
		return // topics of later features, not the controller's
	}
	if err != nil {
		c.reject(node, topic, err)
	}
}

// reject counts a malformed message from node and logs it, at most once
// per node and rejectLogInterval (Controller.rejectLog).
func (c *Controller) reject(node, topic string, err error) {
	c.metrics.messagesRejected.Inc()
	suppressed, ok := c.rejectLog.Allow(node)
	if !ok {
		return
	}
	args := []any{"topic", topic, "err", err}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	c.log.Warn("dropping malformed message", args...)
}

// checkNode verifies that a message names the node of its topic: the ACL
// lets a node write only its own topics, and the payload must agree.
func checkNode(topicNode, payloadNode string) error {
	if topicNode != payloadNode {
		return fmt.Errorf("payload names node %q on a topic of node %q", payloadNode, topicNode)
	}
	return nil
}

func (c *Controller) onStatus(node string, payload []byte) error {
	st, err := schema.DecodeNodeStatus(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, st.Node); err != nil {
		return err
	}
	if c.registry.ApplyStatus(st, c.now()) {
		c.markNodeChanged(node)
		c.wake()
	}
	return nil
}

func (c *Controller) onPresence(node string, payload []byte) error {
	p, err := schema.DecodePresence(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, p.Node); err != nil {
		return err
	}
	if c.registry.ApplyPresence(p, c.now()) {
		c.markNodeChanged(node)
		c.events.addFromNode(node, store.Event{Type: schema.EventNormal, Reason: presenceReason(p.Online), Object: nodeObject(node), Message: presenceMessage(p.Online)})
		c.wake()
	}
	return nil
}

// expireUnconnected ends each online session that no connection holds,
// as the will its broker could not publish would have (embeddedTransport's
// Run says when). connected lists the nodes connected now; it is asked
// after the sessions are read, so a node that reconnects meanwhile is
// either listed or announces a new session, which its old one's end
// cannot mark offline (registry.ApplyPresence).
func (c *Controller) expireUnconnected(connected func() map[string]bool) {
	var online []registry.NodeState
	for _, st := range c.registry.States() {
		if st.Online {
			online = append(online, st)
		}
	}
	if len(online) == 0 {
		return
	}
	now := connected()
	ended := 0
	for _, st := range online {
		if now[st.Name] {
			continue
		}
		will := schema.Presence{SchemaVersion: schema.WireVersion, Node: st.Name, Online: false, Session: st.Session}
		if !c.registry.ApplyPresence(will, c.now()) {
			continue
		}
		ended++
		c.markNodeChanged(st.Name)
		c.events.addFromNode(st.Name, store.Event{Type: schema.EventWarning, Reason: presenceReason(false), Object: nodeObject(st.Name),
			Message: "node is offline: no connection since the controller's broker restarted, and the broker that stopped published no will for it"})
	}
	if ended > 0 {
		c.log.Warn("nodes read online had no connection after the broker restarted: marked offline", "nodes", ended)
		c.wake()
	}
}

func presenceReason(online bool) string {
	if online {
		return "NodeOnline"
	}
	return "NodeOffline"
}

func presenceMessage(online bool) string {
	if online {
		return "agent connected"
	}
	return "agent disconnected"
}

// onObserved records a node's report of what it runs. The controller
// trusts no counter or clock of the device beyond what it issued: a
// report of a generation above the one last issued to the node is
// refused (it would otherwise make every genuine later report look
// stale), and the time an instance became ready is when the controller
// first received it ready (see receivedReadySince).
func (c *Controller) onObserved(node string, payload []byte) error {
	obs, err := schema.DecodeObservedState(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, obs.Node); err != nil {
		return err
	}
	now := c.now()
	var issued uint64
	var old schema.ObservedState
	var ahead, stale bool
	c.state.updateObserved(node, func(gen uint64, prev schema.ObservedState, had bool) (schema.ObservedState, bool) {
		issued, old = gen, prev
		ahead = obs.ObservedGeneration > issued
		stale = had && obs.ObservedGeneration < old.ObservedGeneration
		if ahead || stale {
			return schema.ObservedState{}, false
		}
		receivedReadySince(&obs, old, had, now)
		return obs, true
	})
	if ahead {
		c.refuseObserved(node, obs.ObservedGeneration, issued)
		return nil
	}
	if stale {
		return nil // reordered delivery: an older report must not win
	}
	c.reportFailures(node, old, obs)
	c.wake()
	return nil
}

// refuseObserved counts and records a report of a generation the
// controller never issued to node. The event's message is the same for
// every such report of the node, so repeats fold into one event series
// (see eventSink) instead of flooding the history.
func (c *Controller) refuseObserved(node string, got, issued uint64) {
	c.metrics.observedRejected.WithLabelValues("generation_ahead").Inc()
	c.log.Debug("refusing observed state ahead of the desired state", "node", node, "observedGeneration", got, "desiredGeneration", issued)
	c.events.addFromNode(node, store.Event{Type: schema.EventWarning, Reason: "ObservedGenerationAhead", Object: nodeObject(node),
		Message: "observed state refused: its observedGeneration is above the desired generation issued to this node"})
}

// receivedReadySince replaces the device's ReadySince of every ready
// instance of obs by the controller's clock: the time of the report that
// first showed it ready (kept from old while it stays ready at the same
// revision), now for a newly ready one. A device clock behind would
// otherwise skip minReadySeconds, one ahead stall a rollout. The first
// report the controller has of the node (had false: after the
// controller's restart) keeps the device's times, capped at now, so a
// restart does not make every instance wait minReadySeconds again.
func receivedReadySince(obs *schema.ObservedState, old schema.ObservedState, had bool, now time.Time) {
	was := map[string]*time.Time{}
	for _, in := range old.Instances {
		if in.Ready && in.ReadySince != nil {
			was[in.DaemonSet+"@"+in.Revision] = in.ReadySince
		}
	}
	instances := slices.Clone(obs.Instances)
	for i := range instances {
		in := &instances[i]
		switch since, ok := was[in.DaemonSet+"@"+in.Revision]; {
		case !in.Ready:
		case ok:
			in.ReadySince = since
		case !had && in.ReadySince != nil && !in.ReadySince.After(now):
		default:
			at := now
			in.ReadySince = &at
		}
	}
	obs.Instances = instances
}

// reportFailures records an event for every instance that newly failed.
func (c *Controller) reportFailures(node string, old, now schema.ObservedState) {
	prev := map[string]string{}
	for _, in := range old.Instances {
		prev[in.DaemonSet+"@"+in.Revision] = in.Phase
	}
	for _, in := range now.Instances {
		if !failedPhase(in.Phase) || prev[in.DaemonSet+"@"+in.Revision] == in.Phase {
			continue
		}
		c.events.addFromNode(node, store.Event{Type: schema.EventWarning, Reason: "InstanceFailed", Object: dsObject(in.DaemonSet),
			Message: fmt.Sprintf("node %s: %s: %s", node, in.Phase, in.Message)})
	}
}

func failedPhase(phase string) bool {
	switch phase {
	case schema.PhaseCrashLoopBackOff, schema.PhaseImagePullBackOff, schema.PhaseErrImagePull,
		schema.PhaseFailed, schema.PhaseRefused, schema.PhaseInitError, schema.PhaseInitCrashLoopBackOff,
		schema.PhaseCreateContainerConfigError:
		return true
	}
	return false
}

func (c *Controller) onNodeEvent(node string, payload []byte) error {
	ev, err := schema.DecodeNodeEvent(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, ev.Node); err != nil {
		return err
	}
	msg := ev.Message
	if ev.DaemonSet != "" {
		msg = ev.DaemonSet + ": " + msg
	}
	// Stamped with the controller's clock: the device's orders nothing.
	c.refusals.add(node, ev.Reason, ev.Message, c.now()) // signing.go
	c.events.addFromNode(node, store.Event{Type: ev.Type, Reason: ev.Reason, Object: nodeObject(node), Message: msg})
	return nil
}

// onTelemetry keeps a registered node's resource report. A node the
// registry does not know (never announced, or deleted) holds nothing.
func (c *Controller) onTelemetry(node string, payload []byte) error {
	m, err := schema.DecodeTelemetry(payload)
	if err != nil {
		return err
	}
	if err := checkNode(node, m.Node); err != nil {
		return err
	}
	if _, ok := c.registry.State(node); !ok {
		return nil
	}
	c.telemetry.Add(m, c.now())
	return nil
}

// markNodeChanged records that the registry's record of node changed: it
// is stored at the next flush and decided at the next pass.
func (c *Controller) markNodeChanged(node string) { c.state.nodeChanged(node) }

func nodeObject(name string) string { return "node/" + name }
func dsObject(key string) string    { return "daemonset/" + key }
