package edgeagent

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

type probeKind int

const (
	readiness probeKind = iota
	liveness
	// startup gates the other two: they run once it has succeeded, and
	// its failureThreshold failures restart the container.
	startup
)

// probeKey identifies one probe worker.
type probeKey struct {
	id   string
	kind probeKind
}

// probeTarget is what a worker probes: one run of one container.
type probeTarget struct {
	id        string
	startedAt time.Time
	host      string
	ports     []schema.ContainerPort
}

// livenessFailure is a liveness or startup probe that failed
// failureThreshold times in a row during the container run that started at
// startedAt.
type livenessFailure struct {
	startedAt time.Time
	message   string
}

type probeWorker struct {
	startedAt time.Time
	cancel    context.CancelFunc
}

type readyState struct {
	startedAt time.Time
	ready     bool
}

// prober runs one goroutine per probe of every running container. Workers
// are owned by the prober and joined by stopAll.
type prober struct {
	rt     Runtime
	poke   func()
	log    *slog.Logger
	second time.Duration // length of a probe "second"; shortened in tests
	client *http.Client
	dial   DialFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // guards workers, ready, started, failures
	workers  map[probeKey]probeWorker
	ready    map[string]readyState // readiness by container id
	started  map[string]readyState // startup probe success by container id
	failures map[string]livenessFailure
}

// DialFunc opens a connection to addr ("host:port") over network ("tcp").
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// newProber returns a prober whose httpGet and tcpSocket probes and hooks
// connect through dial; nil uses a net.Dialer.
func newProber(rt Runtime, poke func(), log *slog.Logger, dial DialFunc) *prober {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr := &http.Transport{
		DialContext:       dial,
		DisableKeepAlives: true,
		// Like kubelet: probes check liveness, not certificates.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}
	return &prober{
		rt: rt, poke: poke, log: log, second: time.Second, client: &http.Client{Transport: tr}, dial: dial,
		workers: map[probeKey]probeWorker{}, ready: map[string]readyState{}, started: map[string]readyState{}, failures: map[string]livenessFailure{},
	}
}

// ensure starts a worker for k unless one already probes the same run of
// the container; a worker of an earlier run is replaced.
func (p *prober) ensure(ctx context.Context, k probeKey, t probeTarget, pr schema.Probe) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[k]; ok {
		if w.startedAt.Equal(t.startedAt) {
			return
		}
		w.cancel()
	}
	switch k.kind {
	case readiness:
		p.ready[t.id] = readyState{startedAt: t.startedAt}
	case startup:
		p.started[t.id] = readyState{startedAt: t.startedAt}
	}
	wctx, cancel := context.WithCancel(ctx)
	p.workers[k] = probeWorker{startedAt: t.startedAt, cancel: cancel}
	p.wg.Add(1)
	go p.run(wctx, k, t, withProbeDefaults(pr))
}

// retain stops every worker not in active and forgets their results.
func (p *prober) retain(active map[probeKey]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, w := range p.workers {
		if !active[k] {
			w.cancel()
			delete(p.workers, k)
			switch k.kind {
			case readiness:
				delete(p.ready, k.id)
			case startup:
				delete(p.started, k.id)
			}
		}
	}
}

// stopAll stops every worker and waits for them.
func (p *prober) stopAll() {
	p.retain(nil)
	p.wg.Wait()
}

// isReady reports whether the readiness probe passed for the container run
// that started at startedAt.
func (p *prober) isReady(id string, startedAt time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.ready[id]
	return ok && r.ready && r.startedAt.Equal(startedAt)
}

// isStarted reports whether the startup probe succeeded for the container
// run that started at startedAt.
func (p *prober) isStarted(id string, startedAt time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.started[id]
	return ok && r.ready && r.startedAt.Equal(startedAt)
}

// takeFailures returns and clears the liveness failures reported so far.
func (p *prober) takeFailures() map[string]livenessFailure {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.failures
	p.failures = map[string]livenessFailure{}
	return f
}

// withProbeDefaults applies Kubernetes' defaults: period 10, timeout 1,
// success 1, failure 3.
func withProbeDefaults(pr schema.Probe) schema.Probe {
	if pr.PeriodSeconds <= 0 {
		pr.PeriodSeconds = 10
	}
	if pr.TimeoutSeconds <= 0 {
		pr.TimeoutSeconds = 1
	}
	if pr.SuccessThreshold <= 0 {
		pr.SuccessThreshold = 1
	}
	if pr.FailureThreshold <= 0 {
		pr.FailureThreshold = 3
	}
	return pr
}

// run probes after the initial delay and then every period until ctx ends
// or, for liveness, until the failure threshold is reached, or, for
// startup, until it succeeds or reaches the failure threshold.
func (p *prober) run(ctx context.Context, k probeKey, t probeTarget, pr schema.Probe) {
	defer p.wg.Done()
	if sleepCtx(ctx, time.Duration(pr.InitialDelaySeconds)*p.second) != nil {
		return
	}
	ticker := time.NewTicker(time.Duration(pr.PeriodSeconds) * p.second)
	defer ticker.Stop()
	var successes, failures int32
	for {
		err := p.check(ctx, t, pr)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
		}
		if p.record(k, t, pr, successes, failures, err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// record applies one probe outcome; it reports true when the worker is done
// (a liveness or startup failure, handed to the loop, or a startup
// success).
func (p *prober) record(k probeKey, t probeTarget, pr schema.Probe, successes, failures int32, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[k]; !ok || !w.startedAt.Equal(t.startedAt) {
		return true
	}
	switch k.kind {
	case liveness:
		return p.failedLocked(t, pr, failures, err, "liveness")
	case startup:
		if successes > 0 {
			p.started[t.id] = readyState{startedAt: t.startedAt, ready: true}
			p.poke()
			return true
		}
		return p.failedLocked(t, pr, failures, err, "startup")
	}
	r := p.ready[t.id]
	switch {
	case !r.ready && successes >= pr.SuccessThreshold:
		r.ready = true
	case r.ready && failures >= pr.FailureThreshold:
		r.ready = false
		p.log.Info("readiness probe failing", "container", t.id, "err", err)
	default:
		return false
	}
	p.ready[t.id] = r
	p.poke()
	return false
}

// failedLocked hands a liveness or startup failure to the loop once the
// failure threshold is reached, and reports whether it was.
func (p *prober) failedLocked(t probeTarget, pr schema.Probe, failures int32, err error, kind string) bool {
	if failures < pr.FailureThreshold {
		return false
	}
	p.failures[t.id] = livenessFailure{startedAt: t.startedAt, message: fmt.Sprintf("%s probe failed %d times: %v", kind, failures, err)}
	p.poke()
	return true
}

// check runs the probe once with its timeout; nil is success.
func (p *prober) check(ctx context.Context, t probeTarget, pr schema.Probe) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(pr.TimeoutSeconds)*p.second)
	defer cancel()
	switch {
	case pr.Exec != nil:
		return p.checkExec(ctx, t, pr.Exec)
	case pr.HTTPGet != nil:
		return p.checkHTTP(ctx, t, pr.HTTPGet)
	case pr.TCPSocket != nil:
		return p.checkTCP(ctx, t, pr.TCPSocket)
	}
	return fmt.Errorf("probe has no exec, httpGet or tcpSocket action")
}

func (p *prober) checkExec(ctx context.Context, t probeTarget, e *schema.ExecAction) error {
	code, out, err := p.rt.Exec(ctx, t.id, e.Command)
	if err != nil {
		return fmt.Errorf("exec %q: %w", e.Command, err)
	}
	if code != 0 {
		return fmt.Errorf("exec %q exited with %d: %s", e.Command, code, strings.TrimSpace(string(out)))
	}
	return nil
}

func (p *prober) checkHTTP(ctx context.Context, t probeTarget, h *schema.HTTPGetAction) error {
	port, err := resolvePort(h.Port, t.ports)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(h.Scheme)
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + net.JoinHostPort(hostOr(h.Host, t.host), strconv.Itoa(port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("http probe %s: %w", url, err)
	}
	for _, hd := range h.HTTPHeaders {
		req.Header.Add(hd.Name, hd.Value)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("http probe: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("http probe %s: status %d", url, resp.StatusCode)
	}
	return nil
}

func (p *prober) checkTCP(ctx context.Context, t probeTarget, s *schema.TCPSocketAction) error {
	port, err := resolvePort(s.Port, t.ports)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(hostOr(s.Host, t.host), strconv.Itoa(port))
	conn, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("tcp probe: %w", err)
	}
	return conn.Close()
}

func hostOr(h, def string) string {
	if h != "" {
		return h
	}
	return def
}

// resolvePort returns a probe's port: a number, or the name of one of the
// container's ports.
func resolvePort(v schema.IntOrString, ports []schema.ContainerPort) (int, error) {
	if !v.IsString {
		return int(v.IntVal), nil
	}
	if n, err := strconv.Atoi(v.StrVal); err == nil {
		return n, nil
	}
	for _, p := range ports {
		if p.Name == v.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("probe port %q: no container port of that name", v.StrVal)
}
