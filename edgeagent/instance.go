package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// instance is what the loop remembers about one desired instance between
// passes: restart and pull backoff, counters, and readiness.
type instance struct {
	key          instanceKey
	restarts     int32
	lastExitCode *int32
	crash        retryState
	pull         retryState
	pullErr      string // engine message of the last failed pull
	lastPhase    string // phase reported by the previous pass
	lastBlock    string // message of the last build error that held the instance
	readySince   *time.Time
	exited       map[string]bool      // container ids whose exit was counted
	runningSince map[string]time.Time // when this agent saw each container start
	killReason   map[string]string    // container ids stopped by a liveness probe
}

func (a *Agent) tracker(k instanceKey) *instance {
	inst, ok := a.instances[k]
	if !ok {
		inst = &instance{key: k, exited: map[string]bool{}, runningSince: map[string]time.Time{}, killReason: map[string]string{}}
		a.instances[k] = inst
	}
	return inst
}

// instanceSync reconciles one instance within a pass. phase and message are
// set by the step that keeps the instance from running.
type instanceSync struct {
	a       *Agent
	p       *pass
	inst    *instance
	tmpl    schema.PodTemplateSpec
	specs   []ContainerSpec
	found   containerGroup
	phase   string
	message string
}

// syncInstance brings one instance to its template and returns its status.
// A kept instance (an old revision running while the new one is awaited)
// is only observed when its template is no longer cached.
func (a *Agent) syncInstance(ctx context.Context, p *pass, k instanceKey, found containerGroup, kept bool) schema.InstanceStatus {
	inst := a.tracker(k)
	if found == nil {
		found = containerGroup{}
	}
	rev, ok := a.revisions[k.Revision]
	switch {
	case !ok && kept:
		return a.report(inst, found, "", "kept running until the new revision of "+k.DaemonSet+" arrives", p.now)
	case !ok:
		return a.report(inst, found, schema.PhasePending, "waiting for revision "+k.Revision, p.now)
	}
	if err := a.cfg.Policy.Check(rev.Template); err != nil {
		return a.refuse(ctx, inst, found, err, p.now)
	}
	built, err := a.buildInstance(k, rev.Template)
	if st, blocked := a.buildBlocked(ctx, inst, found, err, p.now); blocked {
		return st
	}
	if err != nil {
		a.removeGroup(ctx, found)
		return a.fail(ctx, inst, containerGroup{}, err.Error(), p.now)
	}
	s := &instanceSync{a: a, p: p, inst: inst, tmpl: rev.Template, specs: built.Containers, found: found}
	s.run(ctx)
	return s.status(ctx)
}

func (s *instanceSync) run(ctx context.Context) {
	s.dropUnknownIndexes(ctx)
	if !s.ensureCreated(ctx) {
		return
	}
	s.applyLiveness(ctx)
	s.startContainers(ctx)
}

// report builds a status without acting. An empty phase derives it from the
// containers: Running when all run, Pending otherwise.
func (a *Agent) report(inst *instance, found containerGroup, phase, msg string, now time.Time) schema.InstanceStatus {
	ready := false
	if phase == "" {
		phase = schema.PhasePending
		if len(found) > 0 && allRunning(found) {
			phase, ready = schema.PhaseRunning, true
		}
	}
	return inst.status(phase, msg, ready, found, now)
}

// refuse removes whatever runs of a refused instance and reports it.
func (a *Agent) refuse(ctx context.Context, inst *instance, found containerGroup, err error, now time.Time) schema.InstanceStatus {
	a.removeGroup(ctx, found)
	if inst.lastPhase != schema.PhaseRefused {
		a.event(ctx, schema.EventWarning, "Refused", inst.key.DaemonSet, err.Error())
	}
	return inst.status(schema.PhaseRefused, err.Error(), false, containerGroup{}, now)
}

func (a *Agent) fail(ctx context.Context, inst *instance, found containerGroup, msg string, now time.Time) schema.InstanceStatus {
	if inst.lastPhase != schema.PhaseFailed {
		a.event(ctx, schema.EventWarning, "Failed", inst.key.DaemonSet, msg)
	}
	return inst.status(schema.PhaseFailed, msg, false, found, now)
}

// status assembles the InstanceStatus and remembers the phase and
// readiness transitions.
func (inst *instance) status(phase, msg string, ready bool, found containerGroup, now time.Time) schema.InstanceStatus {
	inst.lastPhase = phase
	switch {
	case !ready:
		inst.readySince = nil
	case inst.readySince == nil:
		t := now.UTC()
		inst.readySince = &t
	}
	return schema.InstanceStatus{
		DaemonSet: inst.key.DaemonSet, Revision: inst.key.Revision, Phase: phase, Ready: ready,
		ReadySince: inst.readySince, Restarts: inst.restarts, LastExitCode: inst.lastExitCode,
		Message: msg, ContainerIDs: containerIDs(found),
	}
}

func containerIDs(g containerGroup) []string {
	idx := g.indexes()
	ids := make([]string, 0, len(idx))
	for i := len(idx) - 1; i >= 0; i-- {
		ids = append(ids, g[idx[i]].ID)
	}
	return ids
}

func allRunning(g containerGroup) bool {
	for _, c := range g {
		if !c.Running {
			return false
		}
	}
	return true
}

// block records why the instance is not running.
func (s *instanceSync) block(phase, msg string) {
	if s.phase == "" {
		s.phase, s.message = phase, msg
	}
}

// blockOn records a runtime call that failed with err: Failed, unless the
// engine was unavailable (restarting, say), when the instance is Pending
// until a later pass retries the call.
func (s *instanceSync) blockOn(err error, msg string) {
	if errors.Is(err, ErrUnavailable) {
		s.a.log.Warn("container engine unavailable; retrying at a later pass", "daemonSet", s.inst.key.DaemonSet, "err", msg)
		s.block(schema.PhasePending, msg)
		return
	}
	s.block(schema.PhaseFailed, msg)
}

// dropUnknownIndexes removes containers at indexes the template lacks.
func (s *instanceSync) dropUnknownIndexes(ctx context.Context) {
	for i, c := range s.found {
		if i >= len(s.specs) {
			s.a.removeContainer(ctx, c)
			delete(s.found, i)
		}
	}
}

// ensureCreated pulls and creates the missing containers. It reports false
// when the instance cannot proceed in this pass.
func (s *instanceSync) ensureCreated(ctx context.Context) bool {
	if len(s.found) == len(s.specs) {
		return true
	}
	if _, ok := s.found[0]; !ok && SharesNetwork(s.tmpl) && len(s.found) > 0 {
		// The followers' network namespace is gone with the first container.
		s.a.removeGroup(ctx, s.found)
		s.found = containerGroup{}
	}
	if !s.pullMissing(ctx) {
		return false
	}
	for i, spec := range s.specs {
		if _, ok := s.found[i]; ok {
			continue
		}
		if i > 0 && SharesNetwork(s.tmpl) {
			spec.NetworkOf = s.found[0].ID
		}
		c, err := s.a.create(ctx, spec)
		if errors.Is(err, errNameInFlux) {
			s.block(schema.PhasePending, err.Error())
			return false
		}
		if err != nil {
			s.blockOn(err, err.Error())
			return false
		}
		s.found[i] = c
	}
	return true
}

// pullMissing pulls the images of the containers to create, under the
// pull backoff.
func (s *instanceSync) pullMissing(ctx context.Context) bool {
	inst, now := s.inst, s.p.now
	if inst.pull.waiting(now) {
		s.block(schema.PhaseImagePullBackOff, fmt.Sprintf("back-off pulling image: %s", inst.pullErr))
		return false
	}
	for i, c := range s.tmpl.Spec.Containers {
		if _, ok := s.found[i]; ok {
			continue
		}
		auth := s.a.cfg.RegistryAuth
		if s.specs[i].PullAuth != nil {
			auth = s.specs[i].PullAuth
		}
		err := s.a.rt.PullImage(ctx, c.Image, pullPolicy(c), auth)
		if err != nil {
			inst.pull = s.a.cfg.RestartBackoff.next(inst.pull, now, 0)
			inst.pullErr = err.Error()
			s.a.event(ctx, schema.EventWarning, "ErrImagePull", inst.key.DaemonSet, inst.pullErr)
			s.block(schema.PhaseErrImagePull, inst.pullErr)
			return false
		}
	}
	inst.pull, inst.pullErr = retryState{}, ""
	return true
}

// pullPolicy applies Kubernetes' default: Always for ":latest" or untagged
// images, IfNotPresent otherwise.
func pullPolicy(c schema.Container) string {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if strings.Contains(c.Image, "@") {
		return schema.PullIfNotPresent
	}
	last := c.Image[strings.LastIndex(c.Image, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); !ok || tag == "latest" {
		return schema.PullAlways
	}
	return schema.PullIfNotPresent
}

// create creates one container. A name already in use is adopted when the
// container there is the same one (same instance and index).
func (a *Agent) create(ctx context.Context, spec ContainerSpec) (ContainerState, error) {
	id, err := a.rt.Create(ctx, spec)
	if errors.Is(err, ErrNameConflict) {
		return a.adoptByName(ctx, spec)
	}
	if err != nil {
		return ContainerState{}, fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	c, err := a.rt.Inspect(ctx, id)
	if err != nil {
		return ContainerState{}, fmt.Errorf("inspect new container %s: %w", spec.Name, err)
	}
	return c, nil
}

// errNameInFlux: a container name is taken by a container the engine does
// not show yet, or any more. Docker reserves the name before a container can
// be inspected, so a create still running on the engine after its agent was
// killed holds the name for a while; the next pass adopts the container.
var errNameInFlux = errors.New("name held by a container still being created or removed")

func (a *Agent) adoptByName(ctx context.Context, spec ContainerSpec) (ContainerState, error) {
	c, err := a.rt.Inspect(ctx, spec.Name)
	if errors.Is(err, ErrNotFound) {
		return ContainerState{}, fmt.Errorf("create container %s: %w", spec.Name, errNameInFlux)
	}
	if err != nil {
		return ContainerState{}, fmt.Errorf("create container %s: name in use, and inspecting it failed: %w", spec.Name, err)
	}
	for _, l := range []string{LabelManaged, LabelNode, LabelDaemonSet, LabelRevision, LabelIndex} {
		if c.Labels[l] != spec.Labels[l] {
			return ContainerState{}, fmt.Errorf("create container %s: name in use by another container (%s %q, want %q)", spec.Name, l, c.Labels[l], spec.Labels[l])
		}
	}
	a.log.Info("adopted existing container after name conflict", "container", spec.Name)
	return c, nil
}
