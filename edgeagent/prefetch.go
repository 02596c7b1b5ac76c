package edgeagent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Download before switch, the agent's side. The desired state lists the
// revisions the node is to prefetch (schema.DesiredState.Prefetch); the
// agent pulls their images in the background, one image at a time, with
// the same pull path, credentials and image-store fallback as an
// instance's, while the instances keep running. It reports each
// prefetch's progress in its observed state: at once when one is asked
// for, learns a size, ends or fails, and its bytes at most every
// Config.PrefetchReportInterval.
// A failed prefetch is retried under the restart back-off.

// ProgressPuller is a Runtime that reports a pull's progress: the bytes
// transferred and the total as the engine knows them (the total may grow
// as it learns the layers). The Docker and fake runtimes implement it; a
// Runtime that does not still prefetches, reporting bytes only when done.
type ProgressPuller interface {
	PullImageProgress(ctx context.Context, image, policy string, auth *RegistryAuth, progress func(done, total int64)) error
}

// ProgressFetcher is an ImageFetcher that reports a fetch's progress
// likewise (edgeagent/imagefetch implements it).
type ProgressFetcher interface {
	FetchImageProgress(ctx context.Context, image string, progress func(done, total int64)) error
}

// DefaultPrefetchReportInterval is how often at most the agent publishes
// a prefetch's progress.
const DefaultPrefetchReportInterval = 5 * time.Second

// prefetchImage is one image a prefetch pulls, as an instance of the
// revision would pull it.
type prefetchImage struct {
	spec      ContainerSpec // Image and PullAuth
	container schema.Container
	source    string            // the template's imageSource
	pins      []schema.ImagePin // the revision's: a pinned image is fetched as its pin's content
}

// prefetchJob is one prefetch the desired state asks for. Its images are
// unknown (known false) while the revision's template has not arrived.
type prefetchJob struct {
	ask    schema.DesiredInstance
	images []prefetchImage
	known  bool
}

// prefetchProgress is where one prefetch stands.
type prefetchProgress struct {
	done, total []int64 // per image: bytes transferred and known size
	finished    bool
	err         string
	retry       retryState
}

func (p *prefetchProgress) bytes() (done, total int64) {
	for i := range p.done {
		done += p.done[i]
		total += max(p.total[i], p.done[i])
	}
	return done, total
}

// prefetcher runs the prefetches in its own goroutine (Run). The agent's
// loop tells it what the desired state asks for (set); the observed state
// reads what it last reported (reported).
type prefetcher struct {
	pull     func(ctx context.Context, img prefetchImage, progress func(done, total int64)) error
	publish  func(ctx context.Context) // publishes the observed state; called from Run's goroutine
	now      func() time.Time
	backoff  Backoff
	interval time.Duration
	log      *slog.Logger
	wake     chan struct{} // capacity 1

	mu         sync.Mutex // guards the fields below
	jobs       []prefetchJob
	progress   map[schema.DesiredInstance]*prefetchProgress
	current    schema.DesiredInstance // the job under way, if cancel is set
	cancel     context.CancelFunc
	reported   []schema.PrefetchStatus // what the observed state carries
	lastReport time.Time
	stale      bool // reported no longer says which prefetches there are, or how one ended
}

func newPrefetcher(pull func(context.Context, prefetchImage, func(done, total int64)) error, publish func(context.Context),
	now func() time.Time, backoff Backoff, interval time.Duration, log *slog.Logger) *prefetcher {
	return &prefetcher{pull: pull, publish: publish, now: now, backoff: backoff, interval: interval, log: log,
		wake: make(chan struct{}, 1), progress: map[schema.DesiredInstance]*prefetchProgress{}}
}

// set makes jobs the prefetches asked for: those no longer asked are
// forgotten (the one under way is cancelled), new ones wait for their turn.
func (p *prefetcher) set(jobs []prefetchJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	asked := map[schema.DesiredInstance]bool{}
	for _, j := range jobs {
		asked[j.ask] = true
		if p.progress[j.ask] == nil {
			p.progress[j.ask] = &prefetchProgress{}
			p.stale = true
		}
	}
	for ask := range p.progress {
		if !asked[ask] {
			delete(p.progress, ask)
			p.stale = true
		}
	}
	if p.cancel != nil && !asked[p.current] {
		p.cancel()
	}
	p.jobs = jobs
	p.refreshLocked(false)
	p.poke()
}

func (p *prefetcher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// reportedStatus returns the prefetch reports the observed state carries,
// sorted by daemonset; nil when none is asked for.
func (p *prefetcher) reportedStatus() []schema.PrefetchStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reported)
}

// refreshLocked recomputes the reports when they are stale, or when force
// is set and the last report is Config.PrefetchReportInterval old, and
// reports whether they changed.
func (p *prefetcher) refreshLocked(force bool) bool {
	now := p.now()
	if !p.stale && !(force && now.Sub(p.lastReport) >= p.interval) {
		return false
	}
	var out []schema.PrefetchStatus
	for _, j := range p.jobs {
		pr := p.progress[j.ask]
		if pr == nil {
			continue
		}
		done, total := pr.bytes()
		out = append(out, schema.PrefetchStatus{DaemonSet: j.ask.DaemonSet, Revision: j.ask.Revision,
			BytesDone: done, BytesTotal: total, Done: pr.finished, Error: pr.err})
	}
	slices.SortFunc(out, func(a, b schema.PrefetchStatus) int { return strings.Compare(a.DaemonSet, b.DaemonSet) })
	changed := !slices.Equal(out, p.reported)
	p.reported, p.lastReport, p.stale = out, now, false
	return changed
}

// Run prefetches until ctx ends: the first prefetch asked for whose images
// are known, that is not done and not backing off; then the next. It
// returns nil when ctx ends.
func (p *prefetcher) Run(ctx context.Context) error {
	for {
		job, wait, ok := p.next()
		if ok {
			p.runJob(ctx, job)
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-p.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// next picks the job to run now, or says how long to wait at most.
func (p *prefetcher) next() (prefetchJob, time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now, wait := p.now(), time.Hour
	for _, j := range p.jobs {
		pr := p.progress[j.ask]
		switch {
		case !j.known || pr.finished:
		case pr.retry.waiting(now):
			wait = min(wait, pr.retry.until.Sub(now))
		default:
			return j, 0, true
		}
	}
	return prefetchJob{}, wait, false
}

// runJob pulls job's images in turn, recording progress, then its end.
func (p *prefetcher) runJob(ctx context.Context, job prefetchJob) {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	p.current, p.cancel = job.ask, cancel
	if pr := p.progress[job.ask]; pr != nil && len(pr.done) != len(job.images) {
		pr.done, pr.total = make([]int64, len(job.images)), make([]int64, len(job.images))
	}
	p.mu.Unlock()
	var err error
	for i, img := range job.images {
		if err = p.pull(jctx, img, func(done, total int64) { p.advance(ctx, job.ask, i, done, total) }); err != nil {
			break
		}
		p.advance(ctx, job.ask, i, -1, 0)
	}
	p.finish(ctx, job.ask, err)
}

// advance records image i of ask at done bytes of total (done -1: the
// image is present), and publishes when a report is due.
func (p *prefetcher) advance(ctx context.Context, ask schema.DesiredInstance, i int, done, total int64) {
	p.mu.Lock()
	pr := p.progress[ask]
	if pr == nil || i >= len(pr.done) {
		p.mu.Unlock()
		return
	}
	if done < 0 {
		done, total = max(pr.total[i], pr.done[i]), max(pr.total[i], pr.done[i])
	}
	if total > pr.total[i] {
		p.stale = true // a size learnt: report it at once, so a download shows "0 of N" from its start
	}
	pr.done[i], pr.total[i] = done, max(total, pr.total[i])
	changed := p.refreshLocked(true)
	p.mu.Unlock()
	if changed {
		p.publish(ctx)
	}
}

// finish records how ask's run ended and publishes it: done, failed (to
// be retried after a back-off), or cancelled (withdrawn, or the agent
// stopping: nothing to record).
func (p *prefetcher) finish(ctx context.Context, ask schema.DesiredInstance, err error) {
	p.mu.Lock()
	p.cancel = nil
	pr := p.progress[ask]
	switch {
	case pr == nil || ctx.Err() != nil:
		p.mu.Unlock()
		return
	case err == nil:
		pr.finished, pr.err, pr.retry = true, "", retryState{}
	case errors.Is(err, context.Canceled):
		p.mu.Unlock()
		return
	default:
		pr.err = err.Error()
		pr.retry = p.backoff.next(pr.retry, p.now(), 0)
		p.log.Warn("prefetch failed; retrying after a back-off", "daemonSet", ask.DaemonSet, "revision", ask.Revision,
			"err", err, "retryIn", pr.retry.until.Sub(p.now()))
	}
	p.stale = true
	p.refreshLocked(false)
	p.mu.Unlock()
	p.publish(ctx)
}

// syncPrefetch tells the prefetcher what the desired state asks for now.
// It runs on the loop, which owns the desired state, revisions and config
// objects it reads.
func (a *Agent) syncPrefetch() {
	a.prefetch.set(a.prefetchJobs())
}

// prefetchJobs lists the prefetches the desired state asks for, with the
// images of each revision whose template has arrived.
func (a *Agent) prefetchJobs() []prefetchJob {
	if a.desired == nil || len(a.desired.Prefetch) == 0 {
		return nil
	}
	jobs := make([]prefetchJob, 0, len(a.desired.Prefetch))
	for _, ask := range a.desired.Prefetch {
		if ask.DaemonSet == schema.AgentDaemonSet {
			continue // never a container image (the controller refuses it; an agent upgrade downloads when switched)
		}
		job := prefetchJob{ask: ask}
		if rev, ok := a.revisions[ask.Revision]; ok {
			job.images, job.known = a.prefetchImages(ask.DaemonSet, rev.Template), true
		}
		jobs = append(jobs, job)
	}
	return jobs
}

// prefetchImages lists the images of template t of daemonset key, each
// once, with the credentials an instance would pull it with.
func (a *Agent) prefetchImages(key string, t schema.PodTemplateSpec) []prefetchImage {
	ns, _, _ := strings.Cut(key, "/")
	_, secrets, _ := a.configObjectsFor(ns)
	var out []prefetchImage
	pins, _ := schema.ImagePins(t) // pins that do not parse: the instance refuses the revision
	for _, c := range slices.Concat(t.Spec.InitContainers, t.Spec.Containers) {
		if slices.ContainsFunc(out, func(img prefetchImage) bool { return img.spec.Image == c.Image }) {
			continue
		}
		spec := ContainerSpec{Image: c.Image, PullAuth: pullAuthFor(c.Image, t.Spec.ImagePullSecrets, secrets)}
		out = append(out, prefetchImage{spec: spec, container: c, source: t.Spec.ImageSource, pins: pins})
	}
	return out
}

// prefetchPull pulls one image of a prefetch as an instance would.
func (a *Agent) prefetchPull(ctx context.Context, img prefetchImage, progress func(done, total int64)) error {
	_, err := a.ensureImage(ctx, img.spec, img.container, img.source, img.pins, progress)
	return err
}

// publishPrefetch publishes the observed state with new prefetch reports.
func (a *Agent) publishPrefetch(ctx context.Context) {
	if err := a.publishObserved(ctx, false); err != nil {
		a.log.Debug("prefetch progress not published; the next report carries it", "err", err)
	}
}

// prefetchRevisions are the revisions the desired state asks to prefetch:
// their templates are fetched and kept like those of instances.
func (a *Agent) prefetchRevisions() []string {
	if a.desired == nil {
		return nil
	}
	out := make([]string, 0, len(a.desired.Prefetch))
	for _, ask := range a.desired.Prefetch {
		out = append(out, ask.Revision)
	}
	return out
}
