package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Defaults applied by New.
const (
	DefaultPrefix = "/edgeset/leader"
	DefaultTTL    = 10 * time.Second
)

// maxInfoBytes bounds the candidate value (id and API URL) put in etcd.
const maxInfoBytes = 4096

var (
	// ErrNotLeader is returned by a Term's writes once the term has ended
	// or etcd no longer holds its leader key: the write did not land.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader is returned by Leader when no candidate holds the prefix.
	ErrNoLeader = errors.New("no leader elected")

	// The causes of a term's end, from context.Cause of its context.

	// ErrSessionLost: the session's keep-alive ended, or etcd reported its
	// lease gone.
	ErrSessionLost = errors.New("session lease lost")
	// ErrLeaseDeadline: no lease renewal was confirmed before the lease
	// could expire on the server.
	ErrLeaseDeadline = errors.New("lease renewal not confirmed in time")
	// ErrKeyLost: the leader key was deleted or replaced.
	ErrKeyLost = errors.New("leader key deleted or replaced")
	// ErrResigned: the elector resigned (shutdown, or Lead returned).
	ErrResigned = errors.New("resigned")
)

// Info is what a candidate tells the others about itself; the leader's is
// what a standby tells its clients.
type Info struct {
	ID     string `json:"id"`
	APIURL string `json:"apiURL"`
}

// Options configures an Elector. Client, ID, APIURL and Lead are required.
type Options struct {
	Client *clientv3.Client
	// Prefix is the election's key prefix; DefaultPrefix when empty.
	Prefix string
	// ID is this controller's id; APIURL is where its API is served.
	ID     string
	APIURL string
	// TTL is the session lease's TTL, rounded up to whole seconds;
	// DefaultTTL when zero. etcd may raise it to its minimum lease TTL.
	TTL time.Duration
	// Lead runs the leader-only work of one term. Its ctx ends when the
	// term ends; it must return then. When it returns earlier, the elector
	// resigns and campaigns again.
	Lead func(ctx context.Context, t *Term) error
	// RetryInterval is the pause between election rounds that ended in an
	// error; TTL/10 when zero.
	RetryInterval time.Duration
	// Log receives round errors; discarded when nil.
	Log *slog.Logger
}

func (o *Options) applyDefaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = o.TTL / 10
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("leader options: client is required"))
	}
	if o.ID == "" {
		errs = append(errs, errors.New("leader options: id is required"))
	}
	if o.APIURL == "" {
		errs = append(errs, errors.New("leader options: apiURL is required"))
	}
	if o.Lead == nil {
		errs = append(errs, errors.New("leader options: lead is required"))
	}
	if o.TTL < 0 {
		errs = append(errs, fmt.Errorf("leader options: ttl %s is negative", o.TTL))
	}
	if o.RetryInterval < 0 {
		errs = append(errs, fmt.Errorf("leader options: retryInterval %s is negative", o.RetryInterval))
	}
	if len(o.ID)+len(o.APIURL) > maxInfoBytes {
		errs = append(errs, fmt.Errorf("leader options: id and apiURL exceed %d bytes", maxInfoBytes))
	}
	return errors.Join(errs...)
}

// Elector campaigns for leadership of one prefix for as long as Run runs.
type Elector struct {
	opts      Options
	keyPrefix string // Prefix + "/", under which candidates put their keys
	value     string // this candidate's Info, encoded

	mu   sync.Mutex // guards term
	term *Term      // the current term; nil when not leading
}

// New returns an Elector; it fails naming each missing or invalid option.
func New(opts Options) (*Elector, error) {
	opts.applyDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	value, err := json.Marshal(Info{ID: opts.ID, APIURL: opts.APIURL})
	if err != nil {
		return nil, fmt.Errorf("leader: encode info: %w", err)
	}
	return &Elector{opts: opts, keyPrefix: opts.Prefix + "/", value: string(value)}, nil
}

// Term returns the current term, and false when this elector is not leading.
// The term may end at any moment after; its writes are fenced regardless.
func (e *Elector) Term() (*Term, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term, e.term != nil
}

func (e *Elector) setTerm(t *Term) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.term = t
}

// Leader reads the current leader's Info from etcd; ErrNoLeader when there
// is none.
func (e *Elector) Leader(ctx context.Context) (Info, error) {
	resp, err := getFirst(ctx, e.opts.Client, e.keyPrefix)
	if err != nil {
		return Info{}, fmt.Errorf("leader of %s: %w", e.opts.Prefix, err)
	}
	return decodeLeader(e.opts.Prefix, firstKV(resp))
}

// Run campaigns, leads while elected, and campaigns again after each term,
// until ctx ends; it then resigns and returns nil once every goroutine it
// started has returned.
func (e *Elector) Run(ctx context.Context) error {
	for {
		err := e.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			e.opts.Log.Warn("leader election round ended", "prefix", e.opts.Prefix, "id", e.opts.ID, "err", err)
		}
		if !sleep(ctx, e.opts.RetryInterval) {
			return nil
		}
	}
}

// round is one session: campaign, then lead until the term ends.
func (e *Elector) round(ctx context.Context) error {
	sess, err := e.newSession(ctx)
	if err != nil {
		return err
	}
	defer e.closeSession(sess)
	c, err := e.campaign(ctx, sess)
	if err != nil {
		return err
	}
	return e.lead(ctx, sess, c)
}

// session is a concurrency.Session with what the elector knows of its
// lease: granted is when the grant, or the renewal confirm sent, was
// sent, so the lease lives on the server at least until granted+ttl.
type session struct {
	*concurrency.Session
	ttl     time.Duration
	granted time.Time
}

func (e *Elector) newSession(ctx context.Context) (*session, error) {
	seconds := int64(math.Ceil(e.opts.TTL.Seconds()))
	gctx, cancel := context.WithTimeout(ctx, e.opts.TTL)
	defer cancel()
	sent := time.Now()
	grant, err := e.opts.Client.Grant(gctx, seconds)
	if err != nil {
		return nil, fmt.Errorf("grant lease of %ds: %w", seconds, err)
	}
	// The session's context must outlive ctx: Close revokes the lease with
	// it after ctx has ended. Close bounds the revoke by the TTL.
	s, err := concurrency.NewSession(e.opts.Client,
		concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(grant.TTL)),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("session on lease %x: %w", grant.ID, err)
	}
	return &session{Session: s, ttl: time.Duration(grant.TTL) * time.Second, granted: sent}, nil
}

func (e *Elector) closeSession(s *session) {
	if err := s.Close(); err != nil {
		e.opts.Log.Debug("revoke session lease", "lease", fmt.Sprintf("%x", s.Lease()), "err", err)
	}
}

// candidacy is this candidate's key in one round.
type candidacy struct {
	key string // keyPrefix + the lease in hex, as concurrency.Election names it
	rev int64  // the key's create revision
}

// campaign puts this candidate's key and waits until it is the
// first-created key under the prefix, then confirms it leads. It does what
// concurrency.Election.Campaign does, but does not call it: a cancelled
// Campaign resigns on the client's context, which blocks for as long as
// etcd is unreachable, and its wait misses a deletion its watch missed.
// Here the wait is level-triggered (a follower), and a cancelled campaign
// leaves its key to the session's revoke, bounded by the TTL.
func (e *Elector) campaign(ctx context.Context, s *session) (candidacy, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A campaign must not outlive its session: nothing in the wait would
	// notice the lease expiring.
	stop := context.AfterFunc(s.Ctx(), cancel)
	defer stop()
	c, err := e.putCandidate(cctx, s)
	if err != nil {
		return candidacy{}, err
	}
	f := follower{client: e.opts.Client, prefix: e.keyPrefix, resync: opTimeout(s.ttl), retry: e.opts.RetryInterval}
	f.follow(cctx, func(kv *mvccpb.KeyValue) bool {
		// Keys created before ours lead first; a first key that is not
		// older than ours means ours is gone: stop and let confirm say so.
		return kv != nil && kv.CreateRevision < c.rev
	})
	if ctx.Err() == nil && s.Ctx().Err() != nil {
		return candidacy{}, fmt.Errorf("campaign of %s: %w", c.key, ErrSessionLost)
	}
	if err := ctx.Err(); err != nil {
		return candidacy{}, fmt.Errorf("campaign of %s: %w", c.key, err)
	}
	if err := e.confirm(ctx, s, c.key, c.rev); err != nil {
		return candidacy{}, err
	}
	return c, nil
}

// putCandidate creates this round's candidate key on the session's lease.
func (e *Elector) putCandidate(ctx context.Context, s *session) (candidacy, error) {
	key := fmt.Sprintf("%s%x", e.keyPrefix, s.Lease())
	resp, err := e.opts.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.value, clientv3.WithLease(s.Lease()))).
		Commit()
	if err != nil {
		return candidacy{}, fmt.Errorf("put candidate %s: %w", key, err)
	}
	if !resp.Succeeded {
		return candidacy{}, fmt.Errorf("put candidate %s: key exists on a new lease", key)
	}
	return candidacy{key: key, rev: resp.Header.Revision}, nil
}

// resign deletes the candidate key if it is still this candidacy's.
func (e *Elector) resign(ctx context.Context, c candidacy) error {
	_, err := e.opts.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
		Then(clientv3.OpDelete(c.key)).
		Commit()
	if err != nil {
		return fmt.Errorf("resign %s: %w", c.key, err)
	}
	return nil
}

// confirm checks, after the wait ended, that the session is alive and that
// the first-created key under the prefix is key, at rev, on the session's
// lease: the wait can end after the lease expired, as Campaign can return
// success then.
func (e *Elector) confirm(ctx context.Context, s *session, key string, rev int64) error {
	select {
	case <-s.Done():
		return fmt.Errorf("confirm campaign of %s: %w", key, ErrSessionLost)
	default:
	}
	gctx, cancel := context.WithTimeout(ctx, opTimeout(s.ttl))
	defer cancel()
	resp, err := getFirst(gctx, e.opts.Client, e.keyPrefix)
	if err != nil {
		return fmt.Errorf("confirm campaign of %s: %w", key, err)
	}
	kv := firstKV(resp)
	if kv == nil || string(kv.Key) != key || kv.CreateRevision != rev || clientv3.LeaseID(kv.Lease) != s.Lease() {
		return fmt.Errorf("confirm campaign of %s at revision %d: %w", key, rev, ErrKeyLost)
	}
	// The term's lease deadline runs from a renewal sent now: from the
	// grant, a wait longer than the TTL would end the term at once (the
	// session's own keep-alives, which kept the lease alive meanwhile,
	// say nothing of when they were sent).
	sent := time.Now()
	if _, err := e.opts.Client.KeepAliveOnce(gctx, s.Lease()); err != nil {
		return fmt.Errorf("confirm campaign of %s: renew lease %x: %w", key, s.Lease(), err)
	}
	s.granted = sent
	return nil
}

// lead runs one term: Lead under a context the guards end when the term
// can no longer be trusted; then it resigns.
func (e *Elector) lead(ctx context.Context, s *session, c candidacy) error {
	tctx, end := context.WithCancelCause(context.WithoutCancel(ctx))
	defer end(ErrResigned)
	stop := context.AfterFunc(ctx, func() { end(ErrResigned) }) // shutdown
	defer stop()
	t := &Term{
		Key: c.key, Rev: c.rev, Lease: s.Lease(),
		Leader: Info{ID: e.opts.ID, APIURL: e.opts.APIURL},
		kv:     e.opts.Client, ctx: tctx,
	}
	var guards sync.WaitGroup
	guards.Go(func() { guardSession(tctx, end, s) })
	guards.Go(func() { e.guardLease(tctx, end, s) })
	guards.Go(func() { e.guardKey(tctx, end, t, s.ttl) })

	e.setTerm(t)
	err := e.opts.Lead(tctx, t)
	end(ErrResigned)
	e.setTerm(nil)
	guards.Wait()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout(s.ttl))
	defer cancel()
	if rerr := e.resign(rctx, c); rerr != nil {
		e.opts.Log.Debug("resign", "err", rerr)
	}
	if err != nil {
		return fmt.Errorf("lead term %d: %w", t.Rev, err)
	}
	return fmt.Errorf("term %d ended: %w", t.Rev, context.Cause(tctx))
}

// opTimeout bounds one etcd call made while leading: a third of the TTL,
// the keep-alive period.
func opTimeout(ttl time.Duration) time.Duration { return ttl / 3 }

// sleep waits for d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
