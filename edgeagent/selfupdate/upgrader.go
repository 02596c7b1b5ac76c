package selfupdate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// Fetcher fetches a binary from the controller's image store: the layer
// of an image, verified against the digest the caller pins
// (edgeagent/imagefetch implements it).
type Fetcher interface {
	FetchLayer(ctx context.Context, image, digest string) (string, error)
	LayerProgress(digest string) int64
	RemoveLayer(digest string) error
}

// Retries of a failed download: first after retryInitial, doubling to
// retryMax.
const (
	retryInitial = 10 * time.Second
	retryMax     = 5 * time.Minute
)

// Options configure an Upgrader; zero fields take the defaults
// documented.
type Options struct {
	// Boot is what Start found; required.
	Boot Boot
	// Fetcher fetches binaries; nil refuses every upgrade (the agent has
	// no image-url).
	Fetcher Fetcher
	// Platform defaults to this build's (Platform).
	Platform string
	// CheckTimeout bounds the check of a new binary; default
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Log defaults to slog.Default().
	Log *slog.Logger

	// after runs after each step of an install or rollback (tests).
	after func(step string) error
	// selfDigest digests the running binary; default: the file that runs
	// (tests: the file at Boot.Paths.Binary).
	selfDigest func() (string, error)
}

// Upgrader is the agent's edgeagent.SelfUpgrader: it answers SyncSelf
// from its state, and its Run downloads, checks and installs the binary a
// revision asks for, and rolls a binary on trial back when its deadline
// passes unconfirmed.
type Upgrader struct {
	opts Options
	swap swapper
	log  *slog.Logger
	wake chan struct{} // capacity 1: want or trial changed

	mu       sync.Mutex // guards the fields below
	self     Build      // Digest computed when first needed
	trial    *Record    // this binary's unconfirmed trial
	rejected *Record    // the rollback that returned to this binary
	want     *target    // the upgrade asked for; nil: none
	work     work       // how want stands
	cancel   context.CancelFunc
	stale    []string // digests of abandoned downloads, removed by Run
	poke     func()
}

var _ edgeagent.SelfUpgrader = (*Upgrader)(nil)

// target is one upgrade: a revision's binary for this platform.
type target struct {
	revision string
	version  string
	binary   schema.AgentBinary
	deadline time.Duration
	attempts int
}

func (t target) key() string { return t.revision + " " + t.binary.Digest }

// work is how the upgrade to want stands.
type work struct {
	phase, message string
	failures       int       // transient failures in a row
	retryAt        time.Time // zero: may start now
	failed         bool      // a permanent failure: not tried again for this target
}

// New returns an Upgrader continuing from opts.Boot.
func New(opts Options) *Upgrader {
	if opts.Platform == "" {
		opts.Platform = Platform()
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = DefaultCheckTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.selfDigest == nil {
		exe := opts.Boot.Paths.Binary
		opts.selfDigest = func() (string, error) { return fileDigest(runningBinary(exe)) }
	}
	return &Upgrader{opts: opts, swap: swapper{p: opts.Boot.Paths, after: opts.after}, log: opts.Log,
		wake: make(chan struct{}, 1), self: opts.Boot.Self, trial: opts.Boot.Trial, rejected: opts.Boot.Rejected}
}

// SyncSelf implements edgeagent.SelfUpgrader. revision "" means the node
// is to run no revision of the agent's daemonset (or its template has not
// arrived): an upgrade under way is abandoned.
func (u *Upgrader) SyncSelf(revision string, tmpl schema.PodTemplateSpec, poke func()) edgeagent.SelfStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.poke = poke
	if revision == "" {
		u.setWantLocked(nil)
		return edgeagent.SelfStatus{}
	}
	st, t := u.assessLocked(revision, tmpl)
	u.setWantLocked(t)
	if t == nil {
		return st
	}
	return u.workStatusLocked(*t)
}

// assessLocked returns the status of revision, or the upgrade it asks
// for.
func (u *Upgrader) assessLocked(revision string, tmpl schema.PodTemplateSpec) (edgeagent.SelfStatus, *target) {
	up, err := schema.ParseAgentUpgrade(tmpl)
	if err != nil {
		return refused(fmt.Sprintf("revision %s of %s: %v", revision, schema.AgentDaemonSet, strings.ReplaceAll(err.Error(), "\n", "; "))), nil
	}
	if up.Baseline() {
		return edgeagent.SelfStatus{Phase: schema.PhaseRunning, Ready: true,
			Message: fmt.Sprintf("agent %s (the baseline revision keeps the installed agent)", u.self.Version)}, nil
	}
	bin, ok := up.Binaries[u.opts.Platform]
	if !ok {
		names := make([]string, 0, len(up.Binaries))
		for _, p := range up.Platforms() {
			names = append(names, schema.DisplayAgentPlatform(p))
		}
		return refused(fmt.Sprintf("agent %s has no binary for %s (only for %s)", up.Version,
			schema.DisplayAgentPlatform(u.opts.Platform), strings.Join(names, ", "))), nil
	}
	self, err := u.selfLocked()
	if err != nil {
		return edgeagent.SelfStatus{Phase: schema.PhaseFailed, Message: "cannot read the agent's own binary: " + err.Error()}, nil
	}
	switch r := u.rejected; {
	case self.Digest == bin.Digest && u.trial != nil:
		return edgeagent.SelfStatus{Phase: schema.PhasePending, Message: fmt.Sprintf("agent %s on trial: it must connect and receive its desired state", up.Version)}, nil
	case self.Digest == bin.Digest:
		return edgeagent.SelfStatus{Phase: schema.PhaseRunning, Ready: true, Message: "agent " + up.Version}, nil
	case u.trial != nil:
		return edgeagent.SelfStatus{Phase: schema.PhasePending,
			Message: fmt.Sprintf("agent %s on trial; the upgrade to %s waits until it confirms or rolls back", self.Version, up.Version)}, nil
	case r != nil && r.To.Digest == bin.Digest && r.Revision == revision:
		return edgeagent.SelfStatus{Phase: schema.PhaseFailed,
			Message: fmt.Sprintf("agent %s was rolled back to %s: %s", r.To.Version, r.From.Version, r.Reason)}, nil
	case u.opts.Fetcher == nil:
		return refused("this agent fetches nothing from the controller: set image-url (the controller's API) to let it upgrade itself"), nil
	}
	return edgeagent.SelfStatus{}, &target{revision: revision, version: up.Version, binary: bin,
		deadline: up.TrialDeadline, attempts: up.TrialAttempts}
}

func refused(msg string) edgeagent.SelfStatus {
	return edgeagent.SelfStatus{Phase: schema.PhaseRefused, Message: msg}
}

// selfLocked returns the running binary's build, digesting it once.
func (u *Upgrader) selfLocked() (Build, error) {
	if u.self.Digest == "" {
		d, err := u.opts.selfDigest()
		if err != nil {
			return Build{}, err
		}
		u.self.Digest = d
	}
	return u.self, nil
}

// setWantLocked makes t the upgrade asked for, abandoning another one
// under way, and wakes Run when it changed.
func (u *Upgrader) setWantLocked(t *target) {
	switch {
	case t == nil && u.want == nil:
		return
	case t != nil && u.want != nil && t.key() == u.want.key():
		return
	}
	if u.cancel != nil {
		u.cancel()
		u.cancel = nil
	}
	if u.want != nil && (t == nil || t.binary.Digest != u.want.binary.Digest) {
		u.stale = append(u.stale, u.want.binary.Digest)
	}
	u.want, u.work = t, work{}
	if t != nil {
		u.work = work{phase: schema.PhasePending, message: fmt.Sprintf("upgrade to agent %s queued", t.version)}
	}
	u.signal()
}

// workStatusLocked is the status of the upgrade to t.
func (u *Upgrader) workStatusLocked(t target) edgeagent.SelfStatus {
	msg := u.work.message
	if u.work.phase == schema.PhasePulling {
		msg = fmt.Sprintf("%s (%s so far)", msg, mebibytes(u.opts.Fetcher.LayerProgress(t.binary.Digest)))
	}
	return edgeagent.SelfStatus{Phase: u.work.phase, Message: msg}
}

func mebibytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Connected implements edgeagent.SelfUpgrader: a binary on trial is
// confirmed (its record removed); a removal that fails is retried at the
// next desired state.
func (u *Upgrader) Connected() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.trial == nil {
		return
	}
	if err := RemoveRecord(u.opts.Boot.Paths.Record); err != nil {
		u.log.Error("cannot confirm the agent's trial; retrying at the next desired state", "err", err)
		return
	}
	u.log.Info("agent confirmed: it connected and received its desired state", "version", u.trial.To.Version,
		"start", u.trial.Attempts, "after", time.Since(u.opts.Boot.Started).Round(time.Millisecond))
	u.trial = nil
	u.signal()
}

func (u *Upgrader) signal() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// pokeLocked asks the agent for a pass, to report a changed status.
func (u *Upgrader) pokeLocked() {
	if u.poke != nil {
		u.poke()
	}
}

// Run works until ctx ends (nil) or the agent must restart into another
// binary (ErrRestart): after an install, or after rolling back a trial
// whose deadline passed.
func (u *Upgrader) Run(ctx context.Context) error {
	deadline := u.trialTimer()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			deadline = nil
			if u.expireTrial() {
				return ErrRestart
			}
		case <-u.wake:
		case <-retry.C:
		}
		u.removeStale()
		t, wctx, cancel, wait := u.nextWork(ctx)
		if wait > 0 {
			retry.Reset(wait)
		}
		if t == nil {
			continue
		}
		err := u.upgrade(wctx, *t)
		cancel()
		if err == nil {
			return ErrRestart
		}
		if ctx.Err() != nil {
			return nil
		}
		u.failed(*t, err)
	}
}

// trialTimer fires when this binary's trial deadline passes; nil when it
// is not on trial.
func (u *Upgrader) trialTimer() <-chan time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.trial == nil {
		return nil
	}
	left := u.trial.Deadline() - time.Since(u.opts.Boot.Started)
	return time.After(max(left, 0))
}

// expireTrial rolls back a trial still unconfirmed and reports whether it
// did.
func (u *Upgrader) expireTrial() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.trial == nil {
		return false
	}
	rec := *u.trial
	rec.Reason = fmt.Sprintf("agent %s did not connect and receive its desired state within %s of starting", rec.To.Version, rec.Deadline())
	u.log.Error("rolling the agent back", "from", rec.To.Version, "to", rec.From.Version, "reason", rec.Reason)
	if err := u.swap.rollBack(rec); err != nil {
		u.log.Error("cannot roll the agent back; it keeps running", "err", err)
		u.trial = nil
		return false
	}
	return true
}

// removeStale removes the downloads of abandoned upgrades.
func (u *Upgrader) removeStale() {
	u.mu.Lock()
	stale := u.stale
	u.stale = nil
	var keep string
	if u.want != nil {
		keep = u.want.binary.Digest
	}
	u.mu.Unlock()
	for _, d := range stale {
		if d == keep || u.opts.Fetcher == nil {
			continue
		}
		if err := u.opts.Fetcher.RemoveLayer(d); err != nil {
			u.log.Warn("cannot remove an abandoned agent download", "digest", d, "err", err)
		}
	}
}

// nextWork returns the upgrade to start now, with its context (cancelled
// when the upgrade is abandoned) and its cancel, or how long until a
// retry is due.
func (u *Upgrader) nextWork(ctx context.Context) (*target, context.Context, context.CancelFunc, time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.want == nil || u.work.failed || u.trial != nil {
		return nil, nil, nil, 0
	}
	if wait := time.Until(u.work.retryAt); wait > 0 {
		return nil, nil, nil, wait
	}
	wctx, cancel := context.WithCancel(ctx)
	u.cancel = cancel
	t := *u.want
	return &t, wctx, cancel, 0
}

// progress sets the phase of the upgrade to t, if it is still wanted.
func (u *Upgrader) progress(t target, phase, msg string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.want == nil || u.want.key() != t.key() {
		return
	}
	u.work.phase, u.work.message = phase, msg
	u.pokeLocked()
}

// permanentError marks a failure not retried for its target.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// failed records a failed upgrade: permanent ones are Failed and not
// tried again for their target; others are retried with a doubling wait.
func (u *Upgrader) failed(t target, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.want == nil || u.want.key() != t.key() {
		return // abandoned meanwhile
	}
	var perm permanentError
	if errors.As(err, &perm) {
		u.log.Error("agent upgrade failed", "version", t.version, "err", err)
		u.work = work{phase: schema.PhaseFailed, message: fmt.Sprintf("upgrade to agent %s failed: %v", t.version, err), failed: true}
		u.pokeLocked()
		return
	}
	u.work.failures++
	wait := min(retryInitial<<(u.work.failures-1), retryMax)
	u.work.retryAt = time.Now().Add(wait)
	u.work.phase = schema.PhaseErrImagePull
	u.work.message = fmt.Sprintf("download of agent %s failed (retrying in %s): %v", t.version, wait, err)
	u.log.Warn("agent download failed; retrying", "version", t.version, "in", wait, "err", err)
	u.pokeLocked()
}

// upgrade downloads, verifies, checks and installs t's binary. Errors
// that a retry cannot mend are permanentError.
func (u *Upgrader) upgrade(ctx context.Context, t target) error {
	display := schema.DisplayAgentPlatform(u.opts.Platform)
	if err := checkWritable(filepath.Dir(u.opts.Boot.Paths.Binary)); err != nil {
		return permanentError{err}
	}
	u.progress(t, schema.PhasePulling, fmt.Sprintf("downloading agent %s for %s", t.version, display))
	path, err := u.opts.Fetcher.FetchLayer(ctx, t.binary.Image, t.binary.Digest)
	if err != nil {
		return err
	}
	if d, err := fileDigest(path); err != nil || d != t.binary.Digest {
		_ = u.opts.Fetcher.RemoveLayer(t.binary.Digest)
		return fmt.Errorf("the downloaded binary is %s, not %s (%v): discarded", d, t.binary.Digest, err)
	}
	u.progress(t, schema.PhasePending, fmt.Sprintf("checking agent %s", t.version))
	if err := os.Chmod(path, 0o755); err != nil {
		return permanentError{fmt.Errorf("the new binary: %w", err)}
	}
	if err := checkBinary(ctx, path, t.version, u.opts.Platform, u.opts.CheckTimeout); err != nil {
		_ = u.opts.Fetcher.RemoveLayer(t.binary.Digest)
		return permanentError{fmt.Errorf("the new binary failed its check: %w", err)}
	}
	u.mu.Lock()
	self, err := u.selfLocked()
	u.mu.Unlock()
	if err != nil {
		return permanentError{err}
	}
	u.progress(t, schema.PhasePending, fmt.Sprintf("installing agent %s; the agent restarts into it", t.version))
	rec := Record{From: self, To: Build{Version: t.version, Digest: t.binary.Digest}, Revision: t.revision,
		MaxAttempts: t.attempts, DeadlineSeconds: int64(t.deadline / time.Second)}
	if err := u.swap.install(path, rec); err != nil {
		return permanentError{err}
	}
	u.log.Info("agent installed; restarting into it", "from", self.Version, "to", t.version, "trialDeadline", t.deadline, "trialStarts", t.attempts)
	return nil
}

// checkWritable checks that the agent may create files in dir, where its
// binary is replaced.
func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".edgeset-agent-writable-*")
	if err != nil {
		return fmt.Errorf("the agent's binary directory %s is not writable by the agent, and an upgrade replaces the binary there (docs/operations.md, \"Upgrading the agent\"): %w", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}
