package edgeagent

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// DefaultStatusInterval is how often a Node re-measures its status; it
// publishes only when the status changed.
const DefaultStatusInterval = 30 * time.Second

// DefaultSettleInterval is how long after each connection a Node announces
// itself again (NodeOptions.SettleInterval).
const DefaultSettleInterval = 10 * time.Second

// StatusFunc returns the node's current status (labels, taints, measured
// conditions, capacity). Node fills in the schema version and node name.
type StatusFunc func(ctx context.Context) schema.NodeStatus

// NodeOptions configure a Node: one device's agent connected to a broker.
type NodeOptions struct {
	// Agent configures the agent itself; Agent.NodeName names the node.
	Agent Config
	// MQTT configures the broker connection. Node sets ClientID,
	// Username (the node name), Will, Handler and the callbacks.
	MQTT mqttclient.Options
	// Status measures the node; nil announces only the node name.
	Status StatusFunc
	// StatusInterval: zero means DefaultStatusInterval.
	StatusInterval time.Duration
	// Telemetry measures the device's resource usage; nil publishes none.
	Telemetry TelemetryFunc
	// TelemetryInterval is how often it is measured (zero:
	// DefaultTelemetryInterval, negative: never); TelemetryMaxInterval the longest time
	// without a publish (zero: DefaultTelemetryMaxInterval).
	TelemetryInterval, TelemetryMaxInterval time.Duration
	// SubscribeAtMostOnce subscribes to the node's topics (desired state,
	// revisions, config objects, log requests) at QoS 0 instead of 1.
	// Every one of them is retained state (log requests excepted: a lost
	// one ends in its requester's timeout), sessions are clean, and every
	// reconnection subscribes again and receives the retained messages,
	// so QoS 1 adds no delivery guarantee across a lost connection; on a
	// NATS cluster it costs a replicated JetStream consumer per
	// subscription (docs/scale-out.md).
	SubscribeAtMostOnce bool
	// PublishAtMostOnce publishes the node's messages (presence, status,
	// observed state, events, telemetry, log and exec responses) at QoS 0
	// instead of 1; the will stays QoS 1. Every one of them is retained
	// state the node publishes again after each connection, or an event a
	// lost connection may drop anyway. On a NATS cluster a QoS 1 publish
	// is also stored in a replicated JetStream stream, a write on every
	// member for nothing when the controller subscribes at QoS 0, and its
	// PUBACK does not even cover the retained copy's store
	// (docs/scale-out.md).
	PublishAtMostOnce bool
	// SettleInterval is how long after each connection the node announces
	// itself again, once (presence, status, observed state): a clustered
	// broker may deliver a message of the connection it replaced (its will,
	// an older report) after this connection's, or lose a retained one
	// (docs/protocol.md, "Broker failover").
	// Zero means DefaultSettleInterval; negative never.
	SettleInterval time.Duration
	// AllowExec is the device's local policy for remote exec (edgesetctl
	// exec): off by default, and then every request is refused.
	AllowExec bool
}

// Node is an agent connected to a broker: it announces the node (presence
// and status), hands inbound messages to the agent and gives the agent its
// connection.
type Node struct {
	opts   NodeOptions
	agent  *Agent
	client *mqttclient.Client
	log    *slog.Logger
	logs   *LogServer
	exec   *ExecServer

	mu         sync.Mutex         // guards the fields below
	session    int64              // of the connection being made or held
	lastStatus *schema.NodeStatus // last status published on this connection
	// lastTelemetry is the last telemetry published on this connection.
	lastTelemetry *schema.Telemetry
}

// NewNode prepares a Node over runtime rt. Nothing runs before Run.
func NewNode(opts NodeOptions, rt Runtime) (*Node, error) {
	if opts.StatusInterval == 0 {
		opts.StatusInterval = DefaultStatusInterval
	}
	if opts.TelemetryInterval < 0 {
		opts.Telemetry = nil // turned off
	}
	if opts.TelemetryInterval <= 0 {
		opts.TelemetryInterval = DefaultTelemetryInterval
	}
	if opts.TelemetryMaxInterval == 0 {
		opts.TelemetryMaxInterval = DefaultTelemetryMaxInterval
	}
	if opts.SettleInterval == 0 {
		opts.SettleInterval = DefaultSettleInterval
	}
	if opts.Status == nil {
		opts.Status = func(context.Context) schema.NodeStatus { return schema.NodeStatus{} }
	}
	n := &Node{opts: opts, log: opts.Agent.Logger}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	name := opts.Agent.NodeName
	m := opts.MQTT
	m.ClientID, m.Username = schema.MQTTClientID(name), name
	m.PublishAtMostOnce = opts.PublishAtMostOnce
	m.Will = n.will
	m.Handler = n.handle
	m.Stale = func(topic string, pending, incoming []byte) bool {
		return strings.HasSuffix(topic, "/"+schema.TopicDesired) && olderDesired(incoming, pending)
	}
	m.OnConnect = n.onConnect
	m.OnConnectionLost = n.onConnectionLost
	requests, execs := schema.NodeTopic(name, schema.TopicLogsRequest), schema.NodeTopic(name, schema.TopicExecRequest)
	inputs := schema.NodeTopic(name, schema.TopicExecInputPrefix)
	m.NoCoalesce = func(topic string) bool {
		return topic == requests || topic == execs || strings.HasPrefix(topic, inputs) // every exec input chunk counts
	}
	if m.Logger == nil {
		m.Logger = n.log
	}
	if m.AuthRefusedHint == "" {
		m.AuthRefusedHint = authRefusedHint(name, strings.Join(m.BrokerList(), ", "))
	}
	var err error
	if n.client, err = mqttclient.New(m); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	agentCfg := opts.Agent
	agentCfg.republished = n.announcePresence
	if n.agent, err = New(agentCfg, rt, clientConn{n.client, n.subscribeQoS()}); err != nil {
		return nil, err
	}
	n.logs = NewLogServer(LogServerOptions{NodeName: name, Runtime: rt, Conn: clientConn{n.client, n.subscribeQoS()}, Logger: n.log,
		PreviousRunSince: n.agent.PreviousRunSince})
	execer, _ := rt.(Execer)
	n.exec = NewExecServer(ExecServerOptions{NodeName: name, Runtime: rt, Execer: execer, Conn: clientConn{n.client, n.subscribeQoS()},
		Allow: opts.AllowExec, Logger: n.log})
	return n, nil
}

// clientConn adapts the broker client to the agent's Conn: subscriptions at
// qos, remembered by the client across reconnections.
type clientConn struct {
	*mqttclient.Client
	qos byte
}

func (c clientConn) Subscribe(ctx context.Context, filter string) error {
	return c.Client.Subscribe(ctx, mqttclient.Subscription{Filter: filter, QoS: c.qos})
}

// subscribeQoS is the QoS of every subscription the node makes.
func (n *Node) subscribeQoS() byte {
	if n.opts.SubscribeAtMostOnce {
		return 0
	}
	return 1
}

// Agent returns the node's agent.
func (n *Node) Agent() *Agent { return n.agent }

// Client returns the node's broker client.
func (n *Node) Client() *mqttclient.Client { return n.client }

// Run runs the agent (which applies its persisted desired state at once,
// with or without a broker), the broker connection and the status loop
// until ctx ends. On the way out it reports the node offline while still
// connected, since a clean disconnect sends no will.
func (n *Node) Run(ctx context.Context) error {
	connCtx, stopConn := context.WithCancel(context.Background())
	defer stopConn()
	// The downward API (status.hostIP, node labels) is known before the
	// first pass, broker or not.
	n.agent.SetNodeStatus(n.opts.Status(ctx))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return n.agent.Run(gctx) })
	g.Go(func() error { return n.statusLoop(gctx) })
	if n.opts.Telemetry != nil {
		g.Go(func() error { return n.telemetryLoop(gctx) })
	}
	g.Go(func() error { return n.logs.Run(gctx) })
	g.Go(func() error { return n.exec.Run(gctx) })
	clientDone := make(chan error, 1)
	go func() { clientDone <- n.client.Run(connCtx) }()
	err := g.Wait()
	n.goodbye()
	stopConn()
	if cerr := <-clientDone; err == nil && cerr != nil && ctx.Err() == nil {
		err = cerr
	}
	return err
}

// will is the offline presence of the connection about to be made; mqttclient
// calls it before every connection attempt, so each gets a fresh session.
func (n *Node) will() *mqttclient.Message {
	n.mu.Lock()
	n.session = time.Now().UnixNano()
	session := n.session
	n.mu.Unlock()
	return n.presence(false, session)
}

func (n *Node) presence(online bool, session int64) *mqttclient.Message {
	payload, _ := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: n.opts.Agent.NodeName, Online: online, Session: session})
	return &mqttclient.Message{Topic: schema.NodeTopic(n.opts.Agent.NodeName, schema.TopicOnline), Payload: payload, Retained: true}
}

// handle routes an inbound message: a request (signed when the agent
// pins a trust root: Agent.OpenRequest) to its server, anything else to
// the agent.
func (n *Node) handle(topic string, payload []byte) {
	switch {
	case topic == n.logs.Topic():
		if body, ok := n.agent.OpenRequest(topic, payload); ok {
			n.logs.Handle(body)
		}
	case topic == n.exec.Topic():
		if body, ok := n.agent.OpenRequest(topic, payload); ok {
			n.exec.Handle(body)
		}
	case n.exec.IsInputTopic(topic):
		if body, ok := n.agent.OpenRequest(topic, payload); ok {
			n.exec.HandleInput(topic, body)
		}
	default:
		n.agent.HandleMessage(topic, payload)
	}
}

// onConnect announces the node (online, then its status) and lets the agent
// subscribe and report. A step that fails (a publish timing out on a busy
// broker) is retried with backoff for as long as this connection lasts:
// giving up would leave the node connected but announced offline by the
// will of its previous connection, and deaf to its desired state. Once the
// connection has settled it announces its presence again (settle).
func (n *Node) onConnect(ctx context.Context) {
	n.mu.Lock()
	session := n.session
	n.lastStatus, n.lastTelemetry = nil, nil
	n.mu.Unlock()
	delay := 100 * time.Millisecond
	for {
		err := n.announce(ctx, session)
		if err == nil {
			n.settle(ctx, session)
			return
		}
		n.log.Warn("announce after connect; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// announce subscribes the agent, publishes presence and status, and has
// the agent report what it runs. The subscriptions come first: the
// controller answers the announcement at once (Agent.Subscribe).
func (n *Node) announce(ctx context.Context, session int64) error {
	if err := n.agent.Subscribe(ctx); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	p := n.presence(true, session)
	if err := n.client.Publish(ctx, p.Topic, p.Payload, true); err != nil {
		return fmt.Errorf("publish presence: %w", err)
	}
	if err := n.publishStatus(ctx, true); err != nil {
		return fmt.Errorf("publish status: %w", err)
	}
	if err := n.agent.Report(ctx); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for _, topic := range []string{n.logs.Topic(), n.exec.Topic()} {
		if err := n.client.Subscribe(ctx, mqttclient.Subscription{Filter: topic, QoS: n.subscribeQoS()}); err != nil {
			return fmt.Errorf("subscribe %s: %w", topic, err)
		}
	}
	return nil
}

// settle announces the node again SettleInterval after the connection was
// made, unless the connection ends first: its online presence of session,
// its status and its observed state. On a broker cluster a message of the
// connection this one replaced can come after this connection's own: a
// nats-server member stores a retained message in JetStream before it
// delivers it, waiting up to its JetStream API timeout (5 s) while the
// stream has no leader or the member is overloaded, and its client's
// keepalive can expire meanwhile, so the agent reconnects elsewhere and
// publishes there first. The late message is the old connection's will
// (an offline the controller takes for the newest session if it never saw
// that one online), or an older observed report (Pending, of the same
// generation, so the controller cannot tell it is stale) that then holds
// a node that is done as updating for good. A retained message can also
// be lost outright: nats-server acknowledges a QoS 1 publish whose store
// failed. The second announcement, later than any such message, repairs
// all of them; the controller sees the same session online and the same
// report again, which changes nothing when it had them.
func (n *Node) settle(ctx context.Context, session int64) {
	if n.opts.SettleInterval < 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(n.opts.SettleInterval):
	}
	p := n.presence(true, session)
	err := n.client.Publish(ctx, p.Topic, p.Payload, true)
	if err == nil {
		err = n.publishStatus(ctx, true)
	}
	if err == nil {
		err = n.agent.Report(ctx)
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("announce again after the connection settled", "err", err)
	}
}

// announcePresence publishes the online presence of the connection held
// now, if any; the agent calls it when the controller republished its
// desired state (Agent.reportAgain).
func (n *Node) announcePresence(ctx context.Context) {
	if !n.client.Connected() {
		return
	}
	n.mu.Lock()
	session := n.session
	n.mu.Unlock()
	p := n.presence(true, session)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.client.Publish(ctx, p.Topic, p.Payload, true); err != nil {
		n.log.Debug("presence not republished", "err", err)
	}
}

func (n *Node) onConnectionLost(err error) {
	n.log.Warn("broker connection lost", "err", err)
	n.agent.OnConnectionLost()
}

// statusLoop re-measures the status and publishes it when it changed.
func (n *Node) statusLoop(ctx context.Context) error {
	t := time.NewTicker(n.opts.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if !n.client.Connected() {
				n.agent.SetNodeStatus(n.opts.Status(ctx))
				continue
			}
			if err := n.publishStatus(ctx, false); err != nil {
				n.log.Debug("publish status", "err", err)
			}
		}
	}
}

// publishStatus publishes the measured status if it changed since the last
// publish on this connection (or always, with force).
func (n *Node) publishStatus(ctx context.Context, force bool) error {
	st := n.opts.Status(ctx)
	st.SchemaVersion, st.Node = schema.WireVersion, n.opts.Agent.NodeName
	n.agent.SetNodeStatus(st)
	n.mu.Lock()
	same := n.lastStatus != nil && reflect.DeepEqual(*n.lastStatus, st)
	n.mu.Unlock()
	if same && !force {
		return nil
	}
	return n.publishKind(ctx, schema.TopicStatus, st, true, func() { n.lastStatus = &st })
}

// publishKind encodes v and publishes it on the node's topic of kind,
// then, with n.mu held, records it as published.
func (n *Node) publishKind(ctx context.Context, kind string, v any, retained bool, published func()) error {
	payload, err := schema.Encode(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", kind, err)
	}
	if err := n.client.Publish(ctx, schema.NodeTopic(n.opts.Agent.NodeName, kind), payload, retained); err != nil {
		return err
	}
	n.mu.Lock()
	published()
	n.mu.Unlock()
	return nil
}

// goodbye reports the node offline before a clean disconnect.
func (n *Node) goodbye() {
	if !n.client.Connected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n.mu.Lock()
	session := n.session
	n.mu.Unlock()
	p := n.presence(false, session)
	_ = n.client.Publish(ctx, p.Topic, p.Payload, true)
}

// authRefusedHint is what to check when the broker refuses the node's
// credentials; brokerURL names the broker (its URLs, comma-separated).
func authRefusedHint(node, brokerURL string) string {
	return fmt.Sprintf("check that the token was minted by the controller of this broker (edgesetctl token create %s, against that controller), "+
		"that it was minted for node %s (--node-name must match), that it is not revoked (DATA_DIR/revoked-tokens on the controller; edgesetctl token revoke writes it), "+
		"and that %s is that controller's broker; the broker's log names the node and why it refused", node, node, brokerURL)
}
