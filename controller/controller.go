// Package controller is edgeset's controller: it learns the fleet from MQTT,
// keeps desired daemonsets, revisions and rollout state in its store,
// decides placement and rollouts with pure functions, and publishes each
// node's desired state. A pass decides only what the events since the last
// one can change (controller/decider, docs/architecture.md), and a full
// pass from the whole state every full-pass-interval keeps it
// level-triggered: a lost or duplicated message is harmless.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/audit"
	"github.com/edgeset/edgeset/controller/decider"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/controller/ui"
	"github.com/edgeset/edgeset/imagestore"
	"github.com/edgeset/edgeset/internal/loglimit"
	"github.com/edgeset/edgeset/schema"
)

// Controller is one running controller. Create it with New and serve with
// Run; it owns its store, broker (or broker client) and API listener.
type Controller struct {
	cfg        Config
	log        *slog.Logger
	store      *store.Store
	registry   *registry.Registry
	transport  transport    // the embedded broker or an external broker's client
	apiLn      net.Listener // nil with Config.ExternalAPI
	api        apiGate      // the API handler and its requests in flight (apigate.go)
	token      string
	users      *access.Users // API users; the first made from token
	audit      *audit.Log    // the audit log, in the store
	metrics    *metrics
	events     *eventSink
	logs       hub[schema.LogChunk]  // log streams waiting for chunks
	execs      hub[schema.ExecChunk] // exec sessions waiting for chunks
	execInputs execInputs            // interactive exec sessions' input (execinput.go)
	telemetry  *telemetry.Store
	dash       *ui.Dashboard // the web dashboard; nil with ui-disabled
	health     health        // faults that make /readyz fail (health.go)

	rejectLog *loglimit.Limiter // limits the log lines about malformed messages (rejectlog.go)

	// kick wakes the reconcile loop; republish asks for a full republish.
	kick      chan struct{}
	republish chan struct{}
	ready     chan struct{} // closed after the first reconcile pass
	// repairRounds counts the repair loop's finished rounds (repair.go),
	// for those who wait for one: tests and benchmarks.
	repairRounds atomic.Uint64

	// passMu serialises reconcile passes with the API calls that change
	// daemonsets or rollout state, so a pass never overwrites a change made
	// after its snapshot.
	// The lock order (passMu, then the state's own mutex, then the
	// registry's and the event sink's) is fleetState's doc comment.
	passMu sync.Mutex
	state  *fleetState // owns its lock
	// decider is the incremental decision state, owned by the reconcile
	// pass (passMu held); nil until the first pass, and after a pass that
	// could not store its decision (rebuilt from state by the next one).
	decider *decider.Decider
	// lastFull is when the last full pass ran and lastPass when the last
	// pass stored its decision, on the controller's clock (passMu held).
	lastFull, lastPass time.Time

	// sources is the manifests directory's bookkeeping (manifests.go).
	sources sourceTable
	// natsAuth serves a NATS cluster's auth callout (nats-auth-url); nil
	// when not configured.
	natsAuth *natsauth.Responder
	// signing is the online signing key and key set (signing.go); nil
	// unless Config.Signing. refusals counts what agents refused.
	signing  *signingKeys
	refusals *refusals
	// nodeKeys are the keys Secrets are sealed to (sealed.go).
	nodeKeys *nodeKeys
	// images is the image store nodes without a registry fetch from;
	// downloads bounds their blob downloads; fleetSecret authenticates
	// them (images.go).
	images      *imagestore.Store
	downloads   *downloadSlots
	fleetSecret []byte

	closeOnce sync.Once
}

// New opens the store (failing fast if another controller holds it),
// creates the API token and fleet secret on first start, and prepares the
// broker or broker client. Nothing is served until Run.
func New(cfg Config, log *slog.Logger) (*Controller, error) {
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", cfg.DataDir, err)
	}
	c := &Controller{
		cfg: cfg, log: log, registry: registry.New(), metrics: newMetrics(),
		kick: make(chan struct{}, 1), republish: make(chan struct{}, 1), ready: make(chan struct{}),
		rejectLog: loglimit.New(rejectLogInterval, maxRejectLogKeys, nil),
		telemetry: telemetry.New(cfg.TelemetryHistory),
	}
	if err := c.open(); err != nil {
		c.closeResources()
		return nil, err
	}
	c.metrics.addQueueGauges(c)
	return c, nil
}

// open acquires every resource New needs, in order.
func (c *Controller) open() error {
	dataKeys, err := c.openSecretCipher()
	if err != nil {
		return err
	}
	if c.store, err = store.Open(c.cfg.storePath(), store.Options{MaxEvents: c.cfg.MaxEvents, MaxNodeEvents: c.cfg.MaxNodeEvents,
		OnWrite: c.storeWritten, Replicate: c.cfg.Replicate, SecretCipher: dataKeys}); err != nil {
		return err
	}
	if err := c.rewrapSecrets(dataKeys); err != nil {
		return err
	}
	c.events = newEventSink(c.store, c.log, c.metrics, limitsOf(c.cfg))
	c.events.now = c.now // events are stamped on the controller's clock
	if c.token, err = loadOrCreateToken(c.cfg.tokenPath()); err != nil {
		return err
	}
	if c.users, err = access.NewUsers(c.store, c.cfg.userLimits(), c.token, c.now); err != nil {
		return err
	}
	c.audit = audit.NewLog(c.store, c.cfg.auditRetention(), c.now, c.log)
	if err := c.syncNodeEpochs(); err != nil {
		return err
	}
	if c.state, err = loadFleetState(c.store, c.registry, c.cfg.NodeOfflineGrace); err != nil {
		return err
	}
	c.state.siteLabel = c.cfg.SiteLabel
	if c.transport, err = c.openTransport(); err != nil {
		return err
	}
	metered := &meteredTransport{transport: c.transport, messages: c.metrics.messagesOut, bytes: c.metrics.bytesOut}
	signed, err := c.openSigning(metered)
	if err != nil {
		return err
	}
	if c.transport, err = c.openSealing(signed); err != nil {
		return err
	}
	if c.natsAuth, err = c.openNATSAuth(); err != nil {
		return err
	}
	if err = c.openImages(); err != nil {
		return err
	}
	opts := api.Options{
		Token: c.token, Users: c.users, Audit: c.audit, Metrics: c.metrics.handler(), Log: c.log,
		Limits: c.cfg.APILimits(), Observer: apiObserver{c.metrics},
	}
	if !c.cfg.UIDisabled {
		c.dash = ui.New(c, ui.Options{Token: c.token, Users: c.users, Audit: c.audit, SiteLabel: c.cfg.SiteLabel, Log: c.log, Now: c.now})
		opts.UI = c.dash
	}
	c.api.handler = api.New(c, opts)
	if c.cfg.ExternalAPI {
		return nil
	}
	c.apiLn, err = net.Listen("tcp", c.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("listen for the API on %s (api-addr): %w", c.cfg.APIAddr, err)
	}
	return nil
}

func (c *Controller) brokerOptions() broker.Options {
	return broker.Options{
		Addr:          c.cfg.MQTTAddr,
		TLSAddr:       c.cfg.MQTTTLSAddr,
		CertFile:      c.cfg.MQTTTLSCert,
		KeyFile:       c.cfg.MQTTTLSKey,
		ClientCAFile:  c.cfg.MQTTClientCA,
		WebSocketAddr: c.cfg.MQTTWSAddr,
		DataDir:       c.cfg.DataDir,
		Republished:   republishedTopic,
		Limits:        c.cfg.brokerLimits(),
		Logger:        c.log,
	}
}

// APIAddr is the address the API listens on; nil with Config.ExternalAPI.
func (c *Controller) APIAddr() net.Addr {
	if c.apiLn == nil {
		return nil
	}
	return c.apiLn.Addr()
}

// Handler is the controller's API. With Config.ExternalAPI the caller
// serves it: it answers 503 before Run and once Run's context has ended,
// and Run waits for the requests it admitted (their contexts cancelled)
// before it closes the store.
func (c *Controller) Handler() http.Handler { return &c.api }

// MQTTAddr is the embedded broker's TCP address, nil with an external one.
func (c *Controller) MQTTAddr() net.Addr { return c.transport.Addr() }

// Token is the API's bearer token.
func (c *Controller) Token() string { return c.token }

// Synced is closed once the controller has made its first reconcile pass.
func (c *Controller) Synced() <-chan struct{} { return c.ready }

// Run serves until ctx ends, then shuts every part down and joins it. It
// returns the first error of a part that failed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.closeResources()
	g, ctx := errgroup.WithContext(ctx)
	if c.cfg.ExternalAPI {
		g.Go(func() error { return c.api.run(ctx) })
	} else {
		g.Go(func() error { return c.serveAPI(ctx) })
	}
	if c.dash != nil {
		g.Go(func() error { return c.dash.Run(ctx) })
	}
	g.Go(func() error { return c.transport.Run(ctx) })
	g.Go(func() error { return c.reconcileLoop(ctx) })
	g.Go(func() error { return c.republishLoop(ctx) })
	g.Go(func() error { return c.repairLoop(ctx) })
	g.Go(func() error { return c.events.Run(ctx) })
	g.Go(func() error { return c.flushNodesLoop(ctx) })
	g.Go(func() error { return c.imageGCLoop(ctx) })
	if c.cfg.ManifestsDir != "" {
		g.Go(func() error { return c.watchManifests(ctx) })
	}
	if c.natsAuth != nil {
		g.Go(func() error { return c.natsAuth.Run(ctx) })
	}
	if c.signing != nil {
		g.Go(func() error { return c.signingRefreshLoop(ctx) })
	}
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// serveAPI serves the HTTP API within the configured limits until ctx
// ends (api.Server.Serve).
func (c *Controller) serveAPI(ctx context.Context) error {
	srv := c.api.handler
	if c.cfg.APITLSCert != "" {
		return srv.ServeTLS(ctx, c.apiLn, c.cfg.APITLSCert, c.cfg.APITLSKey)
	}
	return srv.Serve(ctx, c.apiLn)
}

// closeResources closes the store and listeners; safe to call twice.
func (c *Controller) closeResources() {
	c.closeOnce.Do(func() {
		if c.apiLn != nil {
			_ = c.apiLn.Close()
		}
		if c.transport != nil {
			_ = c.transport.Close()
		}
		if c.store != nil {
			if err := c.store.Close(); err != nil {
				c.log.Error("close store", "err", err)
			}
		}
	})
}

// now reads the controller's clock: Config.Clock, or time.Now when it is
// nil (ApplyDefaults leaves it nil, so that a Config still compares equal
// to itself). Every decision and stamp reads it; only durations measured
// for metrics and logs read time.Now, since they are of the machine, not
// of the fleet.
func (c *Controller) now() time.Time {
	if c.cfg.Clock == nil {
		return time.Now()
	}
	return c.cfg.Clock()
}

// wake asks the reconcile loop for a pass; it never blocks.
func (c *Controller) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// requestRepublish asks for every node's desired state to be republished.
func (c *Controller) requestRepublish() {
	select {
	case c.republish <- struct{}{}:
	default:
	}
}
