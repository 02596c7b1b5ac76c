package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/leader"
)

// DefaultPrefix is the etcd key prefix of one fleet's controllers.
const DefaultPrefix = "/edgeset"

// leaderKey is the election's prefix under Options.Prefix.
const leaderKey = "/leader"

// secretsRetry is the pause between attempts to reach etcd for the
// shared secrets at start.
const secretsRetry = time.Second

// Options configures a Supervisor. Client, ID, AdvertiseURL and
// Controller.DataDir are required.
type Options struct {
	// Controller is the configuration of the controller each term runs;
	// Run sets its ExternalAPI. Its APIAddr is where the supervisor
	// listens (unless Listener is set), for the process's whole life.
	Controller controller.Config
	// Client is the etcd client; the caller closes it after Run.
	Client *clientv3.Client
	// Prefix is the fleet's etcd key prefix; DefaultPrefix when empty.
	// The election is under Prefix+"/leader", the shared secrets under
	// Prefix+"/secrets/".
	Prefix string
	// ID names this controller among the fleet's; AdvertiseURL is where
	// the others forward requests to it while it leads.
	ID, AdvertiseURL string
	// LeaseTTL is the leader lease's TTL (leader.DefaultTTL when zero):
	// how long a dead leader keeps the others from taking over.
	LeaseTTL time.Duration
	// Prepare, when set, readies each term's controller configuration
	// before the controller opens: restoring the store from etcd into the
	// data directory and fencing its writes with the term (Replicated).
	// Without it every term opens the data directory's store as it is.
	Prepare func(ctx context.Context, s *TermSetup) error
	// Listener, when set, is served instead of a listener on
	// Controller.APIAddr; Run closes it.
	Listener net.Listener
	// Transport forwards a standby's requests to the leader;
	// http.DefaultTransport when nil.
	Transport http.RoundTripper
	// Log receives the supervisor's and every term's controller's lines.
	Log *slog.Logger
}

// TermSetup is what Options.Prepare is given of one won term.
type TermSetup struct {
	// Term is the won term; its writes are fenced.
	Term *leader.Term
	// Config is the term's controller configuration, to complete.
	Config *controller.Config
	// Abort ends the term's controller early with cause (a store cache
	// that may differ from etcd); the supervisor then campaigns again.
	Abort func(cause error)
	// Founder: this process created the fleet's shared secrets in etcd,
	// so it is the fleet's first HA controller, and its data directory's
	// state (a single-node controller's) is the fleet's.
	Founder bool
}

// Supervisor runs one HA controller process: it campaigns for
// leadership, runs a controller for each term it wins, and serves one API
// listener throughout (see the package doc).
type Supervisor struct {
	opts    Options
	ln      net.Listener
	log     *slog.Logger
	founder bool // set by Run before the first term, then read only
}

// New checks opts (the controller's configuration included) and opens
// the API listener; nothing is served until Run.
func New(opts Options) (*Supervisor, error) {
	if err := opts.applyDefaults(); err != nil {
		return nil, err
	}
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", opts.Controller.APIAddr); err != nil {
			return nil, fmt.Errorf("listen for the API on %s (api-addr): %w", opts.Controller.APIAddr, err)
		}
	}
	return &Supervisor{opts: opts, ln: ln, log: opts.Log}, nil
}

func (o *Options) applyDefaults() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	o.Controller.ExternalAPI = true
	o.Controller.ApplyDefaults()
	if o.Controller.Signing && o.Client != nil {
		o.Controller.SigningPeers = signingPeers(o.Client, o.Prefix)
	}
	if o.Controller.BrokerClientID == "" && o.ID != "" {
		o.Controller.BrokerClientID = o.Controller.BrokerUsername + "-" + o.ID
	}
	var errs []error
	if err := o.Controller.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Client == nil {
		errs = append(errs, errors.New("ha: an etcd client is required (etcd-endpoints)"))
	}
	if o.ID == "" {
		errs = append(errs, errors.New("controller-id: required"))
	}
	if o.AdvertiseURL == "" {
		errs = append(errs, errors.New("advertise-url: required"))
	}
	if o.LeaseTTL < 0 {
		errs = append(errs, fmt.Errorf("leader-lease-ttl: must not be negative, got %s", o.LeaseTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return nil
}

// Addr is the API listener's address.
func (s *Supervisor) Addr() net.Addr { return s.ln.Addr() }

// Run reads or creates the shared secrets in etcd, then serves the API
// and campaigns until ctx ends. A term's controller runs until the term
// ends; then it is shut down completely (every goroutine joined, the
// store closed) and the supervisor campaigns again. When ctx ends, Run
// resigns, stops serving, and returns once everything it started has
// returned.
func (s *Supervisor) Run(ctx context.Context) error {
	defer s.ln.Close()
	secrets, err := s.secrets(ctx)
	if err != nil {
		return err
	}
	prefix := s.opts.Prefix + leaderKey
	observer := leader.NewObserver(s.opts.Client, prefix, 0)
	// The standby holds no user table: it admits the admin token and
	// forwards user tokens unchecked to the leader, which checks them.
	gate := api.NewFront(api.Options{Token: secrets.token, DeferUserTokens: true, Log: s.log, Limits: s.opts.Controller.APILimits()})
	f := newFront(s.opts.ID, api.ForwardProof(secrets.token, s.opts.ID), gate, observer, s.opts.Transport, s.log)
	elector, err := leader.New(leader.Options{
		Client: s.opts.Client, Prefix: prefix, ID: s.opts.ID, APIURL: s.opts.AdvertiseURL,
		TTL: s.opts.LeaseTTL, Log: s.log,
		Lead: func(ctx context.Context, t *leader.Term) error { return s.lead(ctx, t, f) },
	})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return observer.Run(gctx) })
	g.Go(func() error { return s.serve(gctx, gate, f) })
	g.Go(func() error { return elector.Run(gctx) })
	return g.Wait()
}

func (s *Supervisor) serve(ctx context.Context, gate *api.Front, f *front) error {
	cfg := s.opts.Controller
	if cfg.APITLSCert != "" {
		return gate.ServeHandlerTLS(ctx, s.ln, f, cfg.APITLSCert, cfg.APITLSKey)
	}
	return gate.ServeHandler(ctx, s.ln, f)
}

// secrets ensures the shared secrets (and registers the online signing
// key), retrying while etcd cannot be
// reached, until ctx ends.
func (s *Supervisor) secrets(ctx context.Context) (sharedSecrets, error) {
	for {
		sec, created, err := ensureSecrets(ctx, s.opts.Client, s.opts.Prefix, s.opts.Controller.DataDir)
		if err == nil {
			err = s.registerSigningKey(ctx)
		}
		if err == nil {
			s.log.Info("shared secrets ready", "created", created, "prefix", s.opts.Prefix)
			s.founder = created
			return sec, nil
		}
		if ctx.Err() != nil {
			return sharedSecrets{}, ctx.Err()
		}
		s.log.Warn("shared secrets from etcd", "err", err)
		select {
		case <-ctx.Done():
			return sharedSecrets{}, ctx.Err()
		case <-time.After(secretsRetry):
		}
	}
}

// registerSigningKey registers this controller's online key in etcd when
// signing is on (signingkeys.go).
func (s *Supervisor) registerSigningKey(ctx context.Context) error {
	if !s.opts.Controller.Signing {
		return nil
	}
	id, err := registerSigningKey(ctx, s.opts.Client, s.opts.Prefix, s.opts.ID, s.opts.Controller.DataDir)
	if err == nil {
		s.log.Info("online signing key registered", "keyID", id)
	}
	return err
}

// lead runs one term's controller until the term's context ends. The
// front hands it the API only once it is open, and takes it back before
// Run returns and the store closes.
func (s *Supervisor) lead(ctx context.Context, t *leader.Term, f *front) error {
	start := time.Now()
	cfg := s.opts.Controller
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	if s.opts.Prepare != nil {
		setup := &TermSetup{Term: t, Config: &cfg, Abort: abort, Founder: s.founder}
		if err := s.opts.Prepare(ctx, setup); err != nil {
			return fmt.Errorf("prepare term %d: %w", t.Rev, err)
		}
	}
	c, err := controller.New(cfg, s.log)
	if err != nil {
		return fmt.Errorf("open the controller of term %d: %w", t.Rev, err)
	}
	s.log.Info("leading", "id", s.opts.ID, "term", t.Rev, "ready_in", time.Since(start).Round(time.Millisecond))
	f.setLeading(c.Handler())
	defer f.setLeading(nil)
	err = c.Run(ctx)
	s.log.Info("term ended", "id", s.opts.ID, "term", t.Rev, "cause", context.Cause(ctx), "led", time.Since(start).Round(time.Millisecond))
	if err != nil {
		return fmt.Errorf("controller of term %d: %w", t.Rev, err)
	}
	if cause := context.Cause(ctx); t.Context().Err() == nil && cause != nil {
		return fmt.Errorf("term %d aborted: %w", t.Rev, cause)
	}
	return nil
}
