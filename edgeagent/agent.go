package edgeagent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/internal/boltfile"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
	"github.com/edgeset/edgeset/signing"
)

// Conn is the agent's MQTT connection as the agent needs it. Inbound
// messages are delivered by the connection's owner to Agent.HandleMessage.
type Conn interface {
	Publish(ctx context.Context, topic string, payload []byte, retained bool) error
	Subscribe(ctx context.Context, filter string) error
	Unsubscribe(ctx context.Context, filter string) error
}

// Config configures an Agent. Zero fields take the defaults documented on
// each; withDefaults is the one place they are applied.
type Config struct {
	// NodeName is this device's name; required.
	NodeName string
	// DataDir holds the local state (DataDir/agent.db); required unless
	// Ephemeral is set.
	DataDir string
	// Ephemeral keeps local state in memory only (simulators).
	Ephemeral bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Policy is what this device refuses to run; the zero value allows all.
	Policy LocalPolicy
	// RegistryAuth is passed to every image pull; nil pulls anonymously.
	RegistryAuth *RegistryAuth
	// Images, when set, fetches images from the controller's image store:
	// under imageSource controller, and when a registry pull fails.
	Images ImageFetcher
	// KubeletLogDir, when set, is the root under which the agent keeps the
	// kubelet's pods/ and containers/ log layout (see KubeletLogs) for log
	// shippers; /var/log on a device. Empty disables it.
	KubeletLogDir string
	// Clock defaults to time.Now; tests inject their own.
	Clock func() time.Time
	// ResyncInterval is the period of the level-triggered reconcile pass
	// that runs even without events or a broker; default 10 s.
	ResyncInterval time.Duration
	// RestartBackoff is the crash and pull retry schedule; the zero value
	// is DefaultBackoff.
	RestartBackoff Backoff
	// EventsRetry is the schedule for re-subscribing to runtime events
	// after the stream fails; default 1 s doubling to 30 s.
	EventsRetry Backoff
	// ProbeDial, when set, opens the connections of httpGet and tcpSocket
	// probes and hooks in place of a net.Dialer. A simulator sets it: its
	// fake containers' addresses are not on any network, and its probes
	// must never leave the process.
	ProbeDial DialFunc
	// ConnTimeout bounds each Publish, Subscribe and Unsubscribe made by
	// the agent itself; default 10 s.
	ConnTimeout time.Duration
	// TrustRoot, when set, is the pinned fleet root key: the agent then
	// accepts only signed documents (trust.go) and signed requests
	// (signedrequests.go). Nil is the insecure mode.
	TrustRoot ed25519.PublicKey
	// SignatureCache, when set, answers the signatures it has already
	// seen verify, for agents that share one: the simulator's devices
	// (signing.SignatureCache). A real agent leaves it nil and verifies
	// each signature itself.
	SignatureCache *signing.SignatureCache
	// SeccompProfileDir holds the profiles of seccompProfile type
	// Localhost; default DefaultSeccompProfileDir, the kubelet's.
	SeccompProfileDir string
	// PrefetchReportInterval is how often at most a prefetch's progress is
	// published; default DefaultPrefetchReportInterval.
	PrefetchReportInterval time.Duration
	// SelfUpgrade, when set, upgrades the agent's own binary for the
	// reserved daemonset schema.AgentDaemonSet (selfupgrade.go).
	SelfUpgrade SelfUpgrader
	// UpdateLockPoll is how often the update locks of the running
	// instances that opt in are looked at between passes; default
	// DefaultUpdateLockPoll.
	UpdateLockPoll time.Duration
	// NodeKeyFile is the node's sealing key (sealing.KeyFile): Secrets
	// reach the node sealed to it. Empty is DataDir/node.key; a missing
	// file is created with a new key. An Ephemeral agent without one
	// keeps a new key in memory.
	NodeKeyFile string
	// SecretsAtRest is where the agent keeps Secrets between runs:
	// SecretsSealed (the default) in its local state as the sealed
	// message received, SecretsInMemory nowhere (and secret volumes on a
	// tmpfs).
	SecretsAtRest string
	// KeyRegistrar, when set, registers the node's public key with the
	// controller when the agent runs (sealed.go); nil leaves it to
	// enrollment or an admin.
	KeyRegistrar KeyRegistrar

	// republished, when set, is called on the agent's goroutine after it
	// reported again for a republished desired state (handleDesired); a
	// Node announces its presence there.
	republished func(ctx context.Context)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 10 * time.Second
	}
	if c.RestartBackoff == (Backoff{}) {
		c.RestartBackoff = DefaultBackoff
	}
	if c.EventsRetry == (Backoff{}) {
		c.EventsRetry = Backoff{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}
	}
	if c.ConnTimeout <= 0 {
		c.ConnTimeout = 10 * time.Second
	}
	if c.SeccompProfileDir == "" {
		c.SeccompProfileDir = DefaultSeccompProfileDir
	}
	if c.PrefetchReportInterval <= 0 {
		c.PrefetchReportInterval = DefaultPrefetchReportInterval
	}
	if c.UpdateLockPoll <= 0 {
		c.UpdateLockPoll = DefaultUpdateLockPoll
	}
	if c.SecretsAtRest == "" {
		c.SecretsAtRest = SecretsSealed
	}
	if c.NodeKeyFile == "" && !c.Ephemeral {
		c.NodeKeyFile = filepath.Join(c.DataDir, sealing.KeyFile)
	}
	return c
}

func (c Config) validate() error {
	if c.NodeName == "" {
		return errors.New("agent config: NodeName is required")
	}
	if c.DataDir == "" && !c.Ephemeral {
		return errNoDataDir
	}
	if c.SecretsAtRest != "" && c.SecretsAtRest != SecretsSealed && c.SecretsAtRest != SecretsInMemory {
		return fmt.Errorf("agent config: SecretsAtRest %q is not %q or %q", c.SecretsAtRest, SecretsSealed, SecretsInMemory)
	}
	return nil
}

// Agent keeps one node's desired state and reconciles the runtime to it. The
// fields after "loop-owned" are touched only by the reconcile loop
// goroutine (and by New before Run starts it).
type Agent struct {
	cfg    Config
	rt     Runtime
	conn   Conn
	log    *slog.Logger
	store  stateStore
	probes *prober
	runs   *runHistory // starts of each container's last two runs, for logs --previous
	hooks  *hooks
	// prefetch downloads the revisions the desired state asks to prefetch
	// (prefetch.go); its own goroutine, its own lock.
	prefetch *prefetcher
	// lockWatch polls the update locks between passes (lockwatch.go).
	lockWatch *lockWatcher
	wake      chan struct{} // capacity 1: a pending request for a pass

	inboxMu sync.Mutex        // guards inbox
	inbox   map[string][]byte // latest payload per topic, not yet processed

	mu        sync.Mutex            // guards connected, missing, observed, published, node
	connected bool                  // between OnConnect and OnConnectionLost
	missing   map[string]bool       // topics of objects referenced but not cached
	observed  *schema.ObservedState // latest computed observed state
	published []byte                // payload of the last successful observed publish
	node      nodeFacts             // the node's announced labels, addresses, capacity

	pubMu sync.Mutex // serialises observed publishes so an older state never lands last

	dropped atomic.Uint64 // events not sent: disconnected or publish failed
	started atomic.Bool   // Run has been called

	// loop-owned
	desired    *schema.DesiredState
	revisions  map[string]schema.Revision
	configMaps map[string]schema.ConfigMap // by content hash
	secrets    map[string]schema.Secret    // by content hash, opened
	applied    uint64
	instances  map[instanceKey]*instance
	restarts   map[string]int32 // restart counts as last persisted, by restartsKey
	klogs      *KubeletLogs     // nil unless Config.KubeletLogDir is set
	volumes    *writtenVolumes
	retries    map[string]retry // missing objects' next re-subscription
	trust      *trustState      // nil in the insecure mode (Config.TrustRoot)
	// deferrals are the updates deferred by an update lock, by daemonset
	// (updatelock.go), as persisted.
	deferrals map[string]deferral

	keys *nodeKeys // the sealing keyring (sealed.go)
}

// retry is when a missing object's topic is subscribed to again, and the
// wait after that.
type retry struct {
	at    time.Time
	delay time.Duration
}

// Re-subscription of missing objects: first after missingRetryInitial,
// doubling to missingRetryMax.
const (
	missingRetryInitial = 5 * time.Second
	missingRetryMax     = 2 * time.Minute
)

// New opens the local state and returns an agent ready to Run. It makes no
// call on rt or conn.
func New(cfg Config, rt Runtime, conn Conn) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	keys, err := openNodeKeys(cfg)
	if err != nil {
		return nil, err
	}
	store, st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg: cfg, rt: rt, conn: conn, log: cfg.Logger.With("node", cfg.NodeName), store: store,
		wake: make(chan struct{}, 1), inbox: map[string][]byte{}, missing: map[string]bool{},
		revisions: map[string]schema.Revision{}, instances: map[instanceKey]*instance{},
		configMaps: map[string]schema.ConfigMap{}, secrets: map[string]schema.Secret{},
		volumes: newWrittenVolumes(), keys: keys,
	}
	a.probes = newProber(rt, a.poke, a.log, cfg.ProbeDial)
	a.runs = newRunHistory()
	a.hooks = newHooks(a.probes.runHandler, a.poke)
	a.prefetch = newPrefetcher(a.prefetchPull, a.publishPrefetch, a.now, cfg.RestartBackoff, cfg.PrefetchReportInterval, a.log)
	a.lockWatch = newLockWatcher(cfg.UpdateLockPoll, a.poke)
	if cfg.KubeletLogDir != "" {
		if a.klogs, err = NewKubeletLogs(cfg.KubeletLogDir); err != nil {
			_ = store.close()
			return nil, err
		}
	}
	if cfg.TrustRoot != nil {
		a.trust = newTrustState(cfg.TrustRoot, cfg.DataDir, cfg.Ephemeral, a.now(), a.log.Error)
	}
	a.restore(st)
	return a, nil
}

// openStore opens the local state and loads it. The state caches what the
// controller sends again on every connection, so a file that cannot be
// read, as a database or in its content, is moved aside (kept for a
// post-mortem) and replaced by an empty one, with an error logged: the
// agent then starts as if never told anything, which removes nothing, and
// is told again once online. A damaged file must not keep a remote device
// from starting.
func openStore(cfg Config) (stateStore, localState, error) {
	if cfg.Ephemeral {
		m := newMemoryStore()
		st, err := m.load()
		return m, st, err
	}
	s, setAside, err := openBoltStore(cfg.DataDir)
	if err != nil {
		return nil, localState{}, err
	}
	if setAside != "" {
		cfg.Logger.Error("the agent's state file was damaged: moved it aside and started without a desired state until the controller sends one",
			"file", s.path, "movedTo", setAside)
	}
	st, loadErr := s.load()
	if loadErr == nil {
		return s, st, nil
	}
	_ = s.close()
	if setAside, err = boltfile.SetAside(s.path); err != nil {
		return nil, localState{}, fmt.Errorf("%w; %w", loadErr, err)
	}
	cfg.Logger.Error("the agent's state file held unreadable state: moved it aside and started without a desired state until the controller sends one",
		"file", s.path, "movedTo", setAside, "err", loadErr)
	s, _, err = openBoltStore(cfg.DataDir)
	if err != nil {
		return nil, localState{}, err
	}
	st, err = s.load()
	if err != nil {
		_ = s.close()
		return nil, localState{}, err
	}
	return s, st, nil
}

// PreviousRunSince returns where the log of container id's run before the
// one that started at current begins, if this agent saw that run
// (LogServerOptions.PreviousRunSince).
func (a *Agent) PreviousRunSince(id string, current time.Time) (time.Time, bool) {
	return a.runs.previousRunSince(id, current)
}

// restore adopts the persisted state, re-verifying each object's hash.
func (a *Agent) restore(st localState) {
	a.applied = st.applied
	a.restarts = st.restarts
	a.deferrals = st.deferrals
	if a.deferrals == nil {
		a.deferrals = map[string]deferral{}
	}
	for h, rev := range st.revisions {
		if h != rev.Hash || schema.TemplateHash(rev.Template) != h {
			a.log.Warn("dropping corrupt cached revision", "revision", h)
			continue
		}
		a.revisions[h] = rev
	}
	a.restoreConfigObjects(st)
	if st.desired != nil && st.desired.Node == a.cfg.NodeName {
		a.desired = st.desired
		a.log.Info("restored desired state", "generation", st.desired.Generation, "instances", len(st.desired.Instances))
	}
	a.mu.Lock()
	a.missing = a.missingTopics()
	a.mu.Unlock()
}

// Run reconciles until ctx ends, then stops every probe and closes the local
// state. It returns nil on cancellation. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { a.watchRuntime(gctx); return nil })
	g.Go(func() error { a.loop(gctx); return nil })
	g.Go(func() error { return a.prefetch.Run(gctx) })
	g.Go(func() error { a.lockWatch.Run(gctx); return nil })
	if a.cfg.KeyRegistrar != nil {
		g.Go(func() error { a.registerKey(gctx); return nil })
	}
	err := g.Wait()
	a.probes.stopAll()
	a.hooks.stopAll()
	return errors.Join(err, a.store.close())
}

// poke asks the loop for a pass without blocking.
func (a *Agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Agent) now() time.Time { return a.cfg.Clock() }

// loop runs a pass at start, on every poke, and at least every
// ResyncInterval (sooner when a backoff expires).
func (a *Agent) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		case <-timer.C:
		}
		a.processInbox(ctx)
		a.reportRequestRefusals(ctx)
		next := a.reconcile(ctx)
		if at := a.resubscribeMissing(ctx); !at.IsZero() {
			next = min(next, max(at.Sub(a.now()), 0))
		}
		timer.Reset(next)
	}
}

// resubscribeMissing subscribes again to the topics of objects still
// missing a while after they were first found missing, which has the
// broker send their retained messages again, with a doubling wait, and
// returns when the next is due (zero if none). A subscription made just as
// its retained message is being spread over a broker cluster's nodes gets
// neither that message nor, later, anything else (the object is published
// once): the instance would wait for its template for ever. On a single
// broker the retry is one SUBSCRIBE now and then while an object really is
// missing (a revision the controller has pruned), nothing otherwise.
func (a *Agent) resubscribeMissing(ctx context.Context) time.Time {
	a.mu.Lock()
	missing, connected := sortedKeys(a.missing), a.connected
	a.mu.Unlock()
	now := a.now()
	next := map[string]retry{}
	var due time.Time
	for _, topic := range missing {
		r, ok := a.retries[topic]
		switch {
		case !ok:
			r = retry{at: now.Add(missingRetryInitial), delay: missingRetryInitial}
		case connected && !now.Before(r.at):
			a.subscribe(ctx, topic)
			r.delay = min(2*r.delay, missingRetryMax)
			r.at = now.Add(r.delay)
		}
		next[topic] = r
		if due.IsZero() || r.at.Before(due) {
			due = r.at
		}
	}
	a.retries = next
	return due
}

// HandleMessage accepts an inbound MQTT message. It never blocks on the
// loop: only the newest payload per topic is kept until the loop takes it.
// For desired states "newest" means the highest generation, not the last
// to arrive: a stale or redelivered state arriving right after a newer one
// must not replace it before the loop has seen it.
func (a *Agent) HandleMessage(topic string, payload []byte) {
	b := append([]byte(nil), payload...)
	a.inboxMu.Lock()
	if old, ok := a.inbox[topic]; !ok || !strings.HasSuffix(topic, "/"+schema.TopicDesired) || !olderDesired(b, old) {
		a.inbox[topic] = b
	}
	a.inboxMu.Unlock()
	a.poke()
}

// olderDesired reports whether payload is a desired state of a lower
// generation than pending (both name one, signed or not); anything else
// is not older, and replaces what is pending.
func olderDesired(payload, pending []byte) bool {
	p, ok := claimedGeneration(payload)
	if !ok {
		return false
	}
	q, ok := claimedGeneration(pending)
	return ok && p < q
}

// claimedGeneration is the generation a desired state names: its own, or
// a signed document's statement's. Nothing is verified yet (the loop
// does): it only orders what waits for the loop, and a forged claim can
// do no more than a forged message that arrived last always could.
func claimedGeneration(b []byte) (uint64, bool) {
	var m struct {
		Generation *uint64 `json:"generation"`
		Payload    []byte  `json:"payload"` // a signed document's statement, base64
	}
	if json.Unmarshal(b, &m) != nil {
		return 0, false
	}
	if m.Generation == nil && len(m.Payload) > 0 {
		var st struct {
			Generation *uint64 `json:"generation"`
		}
		if json.Unmarshal(m.Payload, &st) != nil {
			return 0, false
		}
		m.Generation = st.Generation
	}
	if m.Generation == nil {
		return 0, false
	}
	return *m.Generation, true
}

// OnConnect is called after every (re)connection to the broker: it
// subscribes (Subscribe) and republishes the current observed state
// (Report).
func (a *Agent) OnConnect(ctx context.Context) error {
	return errors.Join(a.Subscribe(ctx), a.Report(ctx))
}

// Subscribe subscribes to the node's desired state and to every revision,
// ConfigMap and Secret still missing. A Node calls it before it announces
// the node: the controller answers an announcement with a desired state at
// once, and a broker that sets a subscription up asynchronously (a NATS
// cluster creates a JetStream consumer per QoS 1 subscription) would lose
// an answer that came first, retained copy and live message alike.
func (a *Agent) Subscribe(ctx context.Context) error {
	a.mu.Lock()
	a.connected = true
	topics := sortedKeys(a.missing)
	a.mu.Unlock()
	var errs []error
	if a.trust != nil { // the key set first: its retained copy comes before the documents it verifies
		if err := a.conn.Subscribe(ctx, schema.KeySetTopic); err != nil {
			errs = append(errs, fmt.Errorf("subscribe %s: %w", schema.KeySetTopic, err))
		}
	}
	if err := a.conn.Subscribe(ctx, a.desiredTopic()); err != nil {
		errs = append(errs, fmt.Errorf("subscribe %s: %w", a.desiredTopic(), err))
	}
	for _, topic := range topics {
		if err := a.conn.Subscribe(ctx, topic); err != nil {
			errs = append(errs, fmt.Errorf("subscribe %s: %w", topic, err))
		}
	}
	return errors.Join(errs...)
}

// Report republishes the current observed state.
func (a *Agent) Report(ctx context.Context) error {
	return a.publishObserved(ctx, true)
}

// OnConnectionLost marks the agent disconnected: events are dropped (and
// counted) rather than published until the next OnConnect.
func (a *Agent) OnConnectionLost() {
	a.mu.Lock()
	a.connected = false
	a.mu.Unlock()
}

// DroppedEvents returns how many events were not published because the
// agent was disconnected or the publish failed.
func (a *Agent) DroppedEvents() uint64 { return a.dropped.Load() }

// Observed returns the latest computed observed state, published or not.
func (a *Agent) Observed() (schema.ObservedState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.observed == nil {
		return schema.ObservedState{}, false
	}
	obs := *a.observed
	obs.Prefetch = a.prefetch.reportedStatus()
	return obs, true
}

func (a *Agent) desiredTopic() string { return schema.NodeTopic(a.cfg.NodeName, schema.TopicDesired) }

func (a *Agent) isConnected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.connected
}

// connCall runs one broker operation bounded by ConnTimeout.
func (a *Agent) connCall(ctx context.Context, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ConnTimeout)
	defer cancel()
	return op(ctx)
}

// watchRuntime pokes the loop on every runtime event of this node and
// re-subscribes with backoff when the stream fails.
func (a *Agent) watchRuntime(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		delivered, err := a.consumeEvents(ctx)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			failures = 0
		}
		failures++
		a.log.Warn("runtime event stream failed; resubscribing", "err", err, "attempt", failures)
		a.poke()
		if sleepCtx(ctx, a.cfg.EventsRetry.Delay(failures)) != nil {
			return
		}
	}
}

func (a *Agent) consumeEvents(ctx context.Context) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, errs := a.rt.Events(ctx)
	// Whatever happened while no stream was open (a container that died
	// during an engine outage) is seen by a pass now, not at the next resync.
	a.poke()
	for {
		select {
		case <-ctx.Done():
			return delivered, ctx.Err()
		case err := <-errs:
			return delivered, err
		case ev, ok := <-events:
			if !ok {
				return delivered, errors.New("runtime event stream closed")
			}
			delivered = true
			if node, ok := ev.Labels[LabelNode]; !ok || node == a.cfg.NodeName {
				a.poke()
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
