// Package fake is an in-memory edgeagent.Runtime for tests and the
// simulator. It keeps no goroutine per container (crashes are timers) and
// delivers events through one buffered channel per subscriber, so one
// process can host thousands of agents each with its own fake engine.
package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

var (
	_ edgeagent.Runtime        = (*Runtime)(nil)
	_ edgeagent.ProgressPuller = (*Runtime)(nil)
)

// ErrEventOverflow ends an event subscription whose buffer filled up; the
// subscriber re-subscribes and resynchronises, as with a real engine.
var ErrEventOverflow = errors.New("fake runtime: event subscriber too slow, stream closed")

// Exit codes the fake reports for containers it stops.
const (
	ExitCodeTerm = 143 // stopped with a grace period (SIGTERM)
	ExitCodeKill = 137 // stopped without grace, or KillAll (SIGKILL)
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// Runtime is an in-memory container engine. Set the knobs before sharing it;
// the function fields must be safe for concurrent use.
type Runtime struct {
	// StartLatency delays every Start, in the caller's goroutine.
	StartLatency time.Duration
	// OnPull, when set, sees every PullImage call with its credentials.
	OnPull func(image string, auth *edgeagent.RegistryAuth)
	// ImagePullFailure, when set and returning an error, fails the pull of
	// that image with the error's message, as an engine would.
	ImagePullFailure func(image string) error
	// CreateFailure, when set and returning an error, fails the Create of
	// that spec with it, as an engine-side refusal would (the Docker
	// runtime's edgeagent.ErrRunAsRoot, say).
	CreateFailure func(spec edgeagent.ContainerSpec) error
	// StartFailure, when set and returning an error, fails the Start of
	// that spec's container with it, leaving it created, as an OCI runtime
	// that cannot set the container up would.
	StartFailure func(spec edgeagent.ContainerSpec) error
	// CrashAfter, when set and returning crash, makes each started container
	// exit with exitCode after the given time.
	CrashAfter func(spec edgeagent.ContainerSpec) (exitCode int, after time.Duration, crash bool)
	// ExecResult answers Exec in a running container; nil answers 0.
	ExecResult func(c edgeagent.ContainerState, cmd []string) (exitCode int, output []byte, err error)
	// ExecInteractive, when set, runs ExecSession in a running container
	// (it may read stdin as it comes, and resize); nil runs it as
	// ExecStream does.
	ExecInteractive func(ctx context.Context, c edgeagent.ContainerState, opts edgeagent.ExecOptions, stdin io.Reader,
		stdout, stderr io.Writer, resize <-chan edgeagent.TerminalSize) (exitCode int, err error)
	// LogOutput answers Logs for an existing container; nil answers an
	// empty log.
	LogOutput func(c edgeagent.ContainerState, opts edgeagent.LogOptions) (io.ReadCloser, error)
	// Files, when set, serves ReadFile: the content of path in container
	// id, and whether it exists.
	Files func(id, path string) ([]byte, bool)
	// RecordHistory makes the engine keep every create, start, stop and
	// remove in History (unbounded: tests only).
	RecordHistory bool
	// Now stamps Created, StartedAt and FinishedAt; nil is time.Now.
	Now func() time.Time
	// EventBuffer is each subscriber's channel capacity; 0 means 256.
	EventBuffer int
	// ImageSize and LinkBytesPerSecond model pull time (pull.go): with
	// both set, pulling an image takes its size over the link's speed.
	ImageSize          func(image string) int64
	LinkBytesPerSecond int64

	mu         sync.Mutex // guards everything below
	containers map[string]*container
	byName     map[string]string
	images     map[string]bool
	ids        imageIDs // images.go
	subs       map[*subscriber]struct{}
	seq        uint64
	stats      Stats
	history    []Op
	pulls      pulls // pull.go
}

// Op is one call that changed a container, as History records it.
type Op struct {
	Action string // "create", "start", "stop" (of a running container), "remove"
	Name   string // the container's name
}

// Stats counts the calls that changed the engine.
type Stats struct {
	Pulls, Creates, Starts, Stops, Removes int
}

type container struct {
	state edgeagent.ContainerState
	spec  edgeagent.ContainerSpec
	run   int         // incremented on every start; stale crash timers compare it
	timer *time.Timer // pending crash, if any
}

type subscriber struct {
	ch   chan edgeagent.RuntimeEvent
	errc chan error
}

// New returns an empty engine with no images.
func New() *Runtime {
	return &Runtime{
		containers: map[string]*container{},
		byName:     map[string]string{},
		images:     map[string]bool{},
		ids:        newImageIDs(),
		subs:       map[*subscriber]struct{}{},
		pulls:      newPulls(),
	}
}

func (r *Runtime) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// AddImage makes images present, as if pulled earlier, each with
// DefaultImageID as its ID.
func (r *Runtime) AddImage(images ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, im := range images {
		r.tagLocked(im, DefaultImageID(im))
	}
}

// Stats returns the call counters.
func (r *Runtime) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// History returns the calls recorded since RecordHistory was set, oldest
// first.
func (r *Runtime) History() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.history...)
}

func (r *Runtime) recordLocked(action, name string) {
	if r.RecordHistory {
		r.history = append(r.history, Op{Action: action, Name: name})
	}
}

// Containers returns every container, managed or not, sorted by name.
func (r *Runtime) Containers() []edgeagent.ContainerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]edgeagent.ContainerState, 0, len(r.containers))
	for _, c := range r.containers {
		out = append(out, cloneState(c.state))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Info implements edgeagent.Runtime.
func (r *Runtime) Info(ctx context.Context) (edgeagent.RuntimeInfo, error) {
	return edgeagent.RuntimeInfo{Name: "fake", Version: "1"}, ctx.Err()
}

// List implements edgeagent.Runtime.
func (r *Runtime) List(ctx context.Context, node string) ([]edgeagent.ContainerState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []edgeagent.ContainerState
	for _, c := range r.containers {
		if c.state.Labels[edgeagent.LabelManaged] == "true" && c.state.Labels[edgeagent.LabelNode] == node {
			out = append(out, cloneState(c.state))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PullImage implements edgeagent.Runtime.
func (r *Runtime) PullImage(ctx context.Context, image, policy string, auth *edgeagent.RegistryAuth) error {
	return r.PullImageProgress(ctx, image, policy, auth, nil)
}

// PullImageProgress implements edgeagent.ProgressPuller: PullImage, with
// the transfer modelled by ImageSize and LinkBytesPerSecond (progress,
// when not nil, sees the bytes transferred).
func (r *Runtime) PullImageProgress(ctx context.Context, image, policy string, auth *edgeagent.RegistryAuth, progress func(done, total int64)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.OnPull != nil {
		r.OnPull(image, auth)
	}
	r.mu.Lock()
	present := r.images[image]
	r.mu.Unlock()
	switch {
	case policy == schema.PullNever && !present:
		return fmt.Errorf("image %s: %w", image, edgeagent.ErrImageNotPresent)
	case policy == schema.PullNever || policy == schema.PullIfNotPresent && present:
		return nil
	}
	if r.ImagePullFailure != nil {
		if err := r.ImagePullFailure(image); err != nil {
			return fmt.Errorf("pull %s: %w", image, err)
		}
	}
	if err := r.transfer(ctx, image, progress); err != nil {
		return fmt.Errorf("pull %s: %w", image, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tagLocked(image, r.ids.servedLocked(image))
	r.pulls.done(image, r.now())
	r.stats.Pulls++
	return nil
}

// Create implements edgeagent.Runtime with Docker's rules: a valid, unused
// name, a present image, and a NetworkOf container that exists.
func (r *Runtime) Create(ctx context.Context, spec edgeagent.ContainerSpec) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkCreateLocked(spec); err != nil {
		return "", err
	}
	r.seq++
	id := fmt.Sprintf("%064x", r.seq)
	r.containers[id] = &container{spec: spec, state: edgeagent.ContainerState{
		ID: id, Name: spec.Name, Image: spec.Image, Labels: cloneLabels(spec.Labels), Created: r.now(),
	}}
	r.byName[spec.Name] = id
	r.stats.Creates++
	r.recordLocked("create", spec.Name)
	r.emitLocked(r.containers[id], "create", 0)
	return id, nil
}

func (r *Runtime) checkCreateLocked(spec edgeagent.ContainerSpec) error {
	if !validName.MatchString(spec.Name) {
		return fmt.Errorf("create %q: invalid container name", spec.Name)
	}
	if _, ok := r.byName[spec.Name]; ok {
		return fmt.Errorf("create %s: %w", spec.Name, edgeagent.ErrNameConflict)
	}
	if !r.images[spec.Image] && !r.ids.content[spec.Image] {
		return fmt.Errorf("create %s: no such image: %s", spec.Name, spec.Image)
	}
	if spec.NetworkOf != "" && r.lookupLocked(spec.NetworkOf) == nil {
		return fmt.Errorf("create %s: network container %s: %w", spec.Name, spec.NetworkOf, edgeagent.ErrNotFound)
	}
	if r.CreateFailure != nil {
		if err := r.CreateFailure(spec); err != nil {
			return fmt.Errorf("create %s: %w", spec.Name, err)
		}
	}
	return nil
}

// lookupLocked finds a container by id or name, as Docker does.
func (r *Runtime) lookupLocked(ref string) *container {
	if c, ok := r.containers[ref]; ok {
		return c
	}
	if id, ok := r.byName[strings.TrimPrefix(ref, "/")]; ok {
		return r.containers[id]
	}
	return nil
}

// Start implements edgeagent.Runtime. Starting a running container is a
// no-op, as in Docker; as in Docker, FinishedAt keeps the end of the
// previous run.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if err := sleepCtx(ctx, r.StartLatency); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(id)
	if c == nil {
		return fmt.Errorf("start %s: %w", id, edgeagent.ErrNotFound)
	}
	if c.state.Running {
		return nil
	}
	if r.StartFailure != nil {
		if err := r.StartFailure(c.spec); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
	}
	if err := r.joinNetworkLocked(c); err != nil {
		return err
	}
	c.run++
	c.state.Running, c.state.StartedAt, c.state.ExitCode, c.state.OOMKilled = true, r.now(), 0, false
	r.stats.Starts++
	r.recordLocked("start", c.state.Name)
	r.emitLocked(c, "start", 0)
	r.scheduleCrashLocked(c)
	return nil
}

func (r *Runtime) joinNetworkLocked(c *container) error {
	switch {
	case c.spec.HostNetwork:
		c.state.IPAddress = ""
	case c.spec.NetworkOf != "":
		owner := r.lookupLocked(c.spec.NetworkOf)
		if owner == nil || !owner.state.Running {
			return fmt.Errorf("start %s: cannot join network of a non running container %s", c.state.Name, c.spec.NetworkOf)
		}
		c.state.IPAddress = owner.state.IPAddress
	default:
		c.state.IPAddress = fmt.Sprintf("10.%d.%d.%d", r.seq>>16&255, r.seq>>8&255, r.seq&255|1)
	}
	return nil
}

func (r *Runtime) scheduleCrashLocked(c *container) {
	if r.CrashAfter == nil {
		return
	}
	code, after, crash := r.CrashAfter(c.spec)
	if !crash {
		return
	}
	id, run := c.state.ID, c.run
	c.timer = time.AfterFunc(after, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if c, ok := r.containers[id]; ok && c.run == run && c.state.Running {
			r.exitLocked(c, code)
		}
	})
}

func (r *Runtime) exitLocked(c *container, code int) {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.state.Running, c.state.ExitCode, c.state.FinishedAt = false, code, r.now()
	r.emitLocked(c, "die", code)
}

// Stop implements edgeagent.Runtime; the container exits at once with
// ExitCodeTerm (ExitCodeKill when grace is zero).
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(id)
	if c == nil {
		return fmt.Errorf("stop %s: %w", id, edgeagent.ErrNotFound)
	}
	r.stats.Stops++
	if c.state.Running {
		r.recordLocked("stop", c.state.Name)
		code := ExitCodeTerm
		if grace <= 0 {
			code = ExitCodeKill
		}
		r.exitLocked(c, code)
	}
	return nil
}

// Remove implements edgeagent.Runtime.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(id)
	if c == nil {
		return nil
	}
	if c.state.Running {
		r.exitLocked(c, ExitCodeKill)
	}
	delete(r.containers, c.state.ID)
	delete(r.byName, c.state.Name)
	r.stats.Removes++
	r.recordLocked("remove", c.state.Name)
	r.emitLocked(c, "destroy", 0)
	return nil
}

// Inspect implements edgeagent.Runtime; id may also be a name.
func (r *Runtime) Inspect(ctx context.Context, id string) (edgeagent.ContainerState, error) {
	if err := ctx.Err(); err != nil {
		return edgeagent.ContainerState{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(id)
	if c == nil {
		return edgeagent.ContainerState{}, fmt.Errorf("inspect %s: %w", id, edgeagent.ErrNotFound)
	}
	return cloneState(c.state), nil
}

// ExecStream runs cmd as Exec does and writes its output to stdout (stdin,
// which ExecResult cannot see, is read to its end first, as a process
// reading all of it would).
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, _ io.Writer) (int, error) {
	if stdin != nil {
		if _, err := io.Copy(io.Discard, stdin); err != nil {
			return 0, err
		}
	}
	code, out, err := r.Exec(ctx, id, cmd)
	if err != nil {
		return 0, err
	}
	if _, err := stdout.Write(out); err != nil {
		return 0, err
	}
	return code, nil
}

var _ edgeagent.SessionExecer = (*Runtime)(nil)

// ExecSession implements edgeagent.SessionExecer through ExecInteractive,
// or, without it, as ExecStream (stdin read to its end first). It closes
// stdin when the command ends, as the contract asks.
func (r *Runtime) ExecSession(ctx context.Context, id string, opts edgeagent.ExecOptions, stdin io.ReadCloser,
	stdout, stderr io.Writer, resize <-chan edgeagent.TerminalSize) (int, error) {
	if stdin != nil {
		defer stdin.Close()
		stop := context.AfterFunc(ctx, func() { _ = stdin.Close() }) // ends a blocked read, as an engine's closed stream does
		defer stop()
	}
	if r.ExecInteractive == nil {
		var in io.Reader
		if stdin != nil {
			in = stdin
		}
		return r.ExecStream(ctx, id, opts.Cmd, in, stdout, stderr)
	}
	st, err := r.Inspect(ctx, id)
	if err != nil {
		return 0, err
	}
	if !st.Running {
		return 0, fmt.Errorf("exec in %s: container is not running", id)
	}
	var in io.Reader
	if stdin != nil {
		in = stdin
	}
	return r.ExecInteractive(ctx, st, opts, in, stdout, stderr, resize)
}

// Exec implements edgeagent.Runtime through ExecResult. Like an engine it
// returns ctx's error when ctx ends first, leaving ExecResult to finish in
// its goroutine.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	st, err := r.Inspect(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if !st.Running {
		return 0, nil, fmt.Errorf("exec in %s: container is not running", id)
	}
	if r.ExecResult == nil {
		return 0, nil, nil
	}
	type result struct {
		code int
		out  []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, out, err := r.ExecResult(st, cmd)
		done <- result{code, out, err}
	}()
	select {
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("exec in %s: %w", id, ctx.Err())
	case res := <-done:
		return res.code, res.out, res.err
	}
}

// Logs implements edgeagent.Runtime through LogOutput.
func (r *Runtime) Logs(ctx context.Context, id string, opts edgeagent.LogOptions) (io.ReadCloser, error) {
	st, err := r.Inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.LogOutput != nil {
		return r.LogOutput(st, opts)
	}
	return io.NopCloser(strings.NewReader("")), nil
}

// ReadFile implements edgeagent.Runtime through Files, keyed by container
// id and path.
func (r *Runtime) ReadFile(ctx context.Context, id, path string, limit int64) ([]byte, error) {
	if _, err := r.Inspect(ctx, id); err != nil {
		return nil, err
	}
	if r.Files == nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, id, edgeagent.ErrNotFound)
	}
	b, ok := r.Files(id, path)
	if !ok {
		return nil, fmt.Errorf("read %s in %s: %w", path, id, edgeagent.ErrNotFound)
	}
	if int64(len(b)) > limit {
		b = b[:limit]
	}
	return b, nil
}

// Events implements edgeagent.Runtime. The stream ends with ctx's error, or
// with ErrEventOverflow when the subscriber falls EventBuffer events behind.
func (r *Runtime) Events(ctx context.Context) (<-chan edgeagent.RuntimeEvent, <-chan error) {
	n := r.EventBuffer
	if n <= 0 {
		n = 256
	}
	s := &subscriber{ch: make(chan edgeagent.RuntimeEvent, n), errc: make(chan error, 1)}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.endLocked(s, ctx.Err())
	})
	return s.ch, s.errc
}

func (r *Runtime) endLocked(s *subscriber, err error) {
	if _, ok := r.subs[s]; !ok {
		return
	}
	delete(r.subs, s)
	s.errc <- err
}

func (r *Runtime) emitLocked(c *container, action string, code int) {
	ev := edgeagent.RuntimeEvent{ContainerID: c.state.ID, Action: action, ExitCode: code, Labels: cloneLabels(c.state.Labels), Time: r.now()}
	for s := range r.subs {
		select {
		case s.ch <- ev:
		default:
			r.endLocked(s, ErrEventOverflow)
		}
	}
}

// Crash makes a running container exit with code, as if its process died.
func (r *Runtime) Crash(id string, code int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(id)
	if c == nil {
		return fmt.Errorf("crash %s: %w", id, edgeagent.ErrNotFound)
	}
	if !c.state.Running {
		return fmt.Errorf("crash %s: container is not running", id)
	}
	r.exitLocked(c, code)
	return nil
}

// OOMKill makes a running container exit with ExitCodeKill and OOMKilled
// set, as the kernel's OOM killer would.
func (r *Runtime) OOMKill(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(id)
	if c == nil {
		return fmt.Errorf("oom-kill %s: %w", id, edgeagent.ErrNotFound)
	}
	if !c.state.Running {
		return fmt.Errorf("oom-kill %s: container is not running", id)
	}
	c.state.OOMKilled = true
	r.emitLocked(c, "oom", 0)
	r.exitLocked(c, ExitCodeKill)
	return nil
}

// KillAll makes every running container exit with ExitCodeKill, as a power
// cut would.
func (r *Runtime) KillAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.state.Running {
			r.exitLocked(c, ExitCodeKill)
		}
	}
}

func cloneState(s edgeagent.ContainerState) edgeagent.ContainerState {
	s.Labels = cloneLabels(s.Labels)
	return s
}

func cloneLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
