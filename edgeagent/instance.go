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
	// pullMismatch: the last failed pull found other content than the
	// pinned one (ImageDigestError): Failed, not ImagePullBackOff.
	pullMismatch bool
	lastPhase    string // phase reported by the previous pass
	lastBlock    string // message of the last build error that held the instance
	readySince   *time.Time
	// sawMain: this agent has seen the instance's main containers; when
	// they are all gone the instance is recreated, init containers first.
	sawMain      bool
	exited       map[string]string     // container ids whose exit was counted: how it ended (exitMessage)
	runningSince map[string]time.Time  // when this agent saw each container start
	killReason   map[string]killReason // container ids this agent stopped to restart them
}

// killReason is why the agent stopped a container it then restarts: the
// event reason and message of the restart.
type killReason struct {
	reason  string // "Unhealthy", "FailedPostStartHook"
	message string
}

func (a *Agent) tracker(k instanceKey) *instance {
	inst, ok := a.instances[k]
	if !ok {
		inst = &instance{key: k, exited: map[string]string{}, runningSince: map[string]time.Time{}, killReason: map[string]killReason{},
			restarts: a.restarts[restartsKey(k)]}
		a.instances[k] = inst
	}
	return inst
}

// instanceSync reconciles one instance within a pass. phase and message are
// set by the step that keeps the instance from running.
type instanceSync struct {
	a     *Agent
	p     *pass
	inst  *instance
	tmpl  schema.PodTemplateSpec
	pins  []schema.ImagePin // the revision's (schema.ImagePinsAnnotation)
	spec  InstanceSpec
	found containerGroup
	// initializing: the pass is running the init sequence, so failures
	// report the Init: phases.
	initializing bool
	phase        string
	message      string
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
	pins, err := schema.ImagePins(rev.Template)
	if err != nil {
		return a.refuse(ctx, inst, found, fmt.Errorf("revision %s: %w", k.Revision, err), p.now)
	}
	spec, err := a.buildInstance(k, rev.Template)
	if st, blocked := a.buildBlocked(ctx, inst, found, err, p.now); blocked {
		return st
	}
	if err != nil {
		a.removeGroup(ctx, found)
		return a.fail(ctx, inst, containerGroup{}, err.Error(), p.now)
	}
	s := &instanceSync{a: a, p: p, inst: inst, tmpl: rev.Template, pins: pins, spec: spec, found: found}
	s.run(ctx)
	return s.status(ctx)
}

// run drives the instance one step: recreate it when broken, run its init
// containers in order until they have all completed (sidecars started),
// then create, start and restart its long-running containers.
func (s *instanceSync) run(ctx context.Context) {
	s.dropUnknownSlots(ctx)
	s.recreateIfBroken(ctx)
	if !s.found.hasMain() {
		s.initializing = true
		if !s.runInit(ctx) {
			return
		}
		s.initializing = false
	}
	if !s.ensureCreated(ctx) {
		return
	}
	s.inst.sawMain = true
	s.applyKills(ctx)
	s.startContainers(ctx)
}

// report builds a status without acting. An empty phase derives it from the
// containers: Running when all main containers run, Pending otherwise.
func (a *Agent) report(inst *instance, found containerGroup, phase, msg string, now time.Time) schema.InstanceStatus {
	ready := false
	if phase == "" {
		phase = schema.PhasePending
		if found.hasMain() && mainsRunning(found) {
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

// configRefused reports an instance the runtime would not create for a
// reason of its config (runAsNonRoot and a root image), with an event when
// it starts being held.
func (a *Agent) configRefused(ctx context.Context, inst *instance, found containerGroup, msg string, now time.Time) schema.InstanceStatus {
	if inst.lastPhase != schema.PhaseCreateContainerConfigError {
		a.event(ctx, schema.EventWarning, "CreateContainerConfigError", inst.key.DaemonSet, msg)
	}
	return inst.status(schema.PhaseCreateContainerConfigError, msg, false, found, now)
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

// containerIDs lists the main containers in template order, then the init
// containers in template order.
func containerIDs(g containerGroup) []string {
	order := g.stopOrder()
	ids := make([]string, 0, len(order))
	for _, init := range []bool{false, true} {
		for i := len(order) - 1; i >= 0; i-- {
			if order[i].init == init {
				ids = append(ids, g[order[i]].ID)
			}
		}
	}
	return ids
}

// mainsRunning reports whether every main container of g runs.
func mainsRunning(g containerGroup) bool {
	for sl, c := range g {
		if !sl.init && !c.Running {
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
// until a later pass retries the call, or the image would run as root
// under runAsNonRoot, which the kubelet reports as
// CreateContainerConfigError (and retries, as every pass does here).
func (s *instanceSync) blockOn(err error, msg string) {
	switch {
	case errors.Is(err, ErrUnavailable):
		s.a.log.Warn("container engine unavailable; retrying at a later pass", "daemonSet", s.inst.key.DaemonSet, "err", msg)
		s.block(schema.PhasePending, msg)
	case errors.Is(err, ErrRunAsRoot):
		s.block(schema.PhaseCreateContainerConfigError, msg)
	default:
		s.block(schema.PhaseFailed, msg)
	}
}

// specAt is the ContainerSpec of a slot.
func (s *instanceSync) specAt(sl slot) ContainerSpec {
	if sl.init {
		return s.spec.Init[sl.index]
	}
	return s.spec.Containers[sl.index]
}

// containerAt is the template container of a slot.
func (s *instanceSync) containerAt(sl slot) schema.Container {
	return templateContainer(s.tmpl.Spec, sl)
}

func templateContainer(p schema.PodSpec, sl slot) schema.Container {
	if sl.init {
		return p.InitContainers[sl.index]
	}
	return p.Containers[sl.index]
}

// hasSlot reports whether the template has the slot.
func hasSlot(p schema.PodSpec, sl slot) bool {
	if sl.init {
		return sl.index < len(p.InitContainers)
	}
	return sl.index < len(p.Containers)
}

// longRunning returns the slots that run for the instance's life: the
// sidecars in template order, then the main containers.
func (s *instanceSync) longRunning() []slot {
	var out []slot
	for i := range s.tmpl.Spec.InitContainers {
		if isSidecar(s.tmpl.Spec, initSlot(i)) {
			out = append(out, initSlot(i))
		}
	}
	for i := range s.tmpl.Spec.Containers {
		out = append(out, mainSlot(i))
	}
	return out
}

// dropUnknownSlots removes containers in slots the template lacks.
func (s *instanceSync) dropUnknownSlots(ctx context.Context) {
	for _, sl := range s.found.stopOrder() {
		if !hasSlot(s.tmpl.Spec, sl) {
			s.a.removeContainer(ctx, s.found, s.found[sl])
			delete(s.found, sl)
		}
	}
}

// recreateIfBroken removes the whole instance, so that it starts again
// from its first init container, when the owner of its network namespace
// is gone while other containers joined it, or when its main containers
// were all removed after this agent saw them.
func (s *instanceSync) recreateIfBroken(ctx context.Context) {
	if len(s.found) == 0 {
		return
	}
	why := ""
	if owner, ok := networkOwner(s.tmpl.Spec); ok {
		if _, has := s.found[owner]; !has && s.anyJoins() {
			why = "the owner of its network namespace is gone"
		}
	}
	if why == "" && s.inst.sawMain && !s.found.hasMain() {
		why = "its containers are gone"
	}
	if why == "" {
		return
	}
	s.a.log.Info("recreating instance: "+why, "daemonSet", s.inst.key.DaemonSet, "revision", s.inst.key.Revision)
	s.a.removeGroup(ctx, s.found)
	s.found = containerGroup{}
	s.inst.sawMain = false
}

// anyJoins reports whether a container found joined the network owner.
func (s *instanceSync) anyJoins() bool {
	for sl := range s.found {
		if joinsNetwork(s.tmpl.Spec, sl) {
			return true
		}
	}
	return false
}

// ensureCreated pulls and creates the missing long-running containers. It
// reports false when the instance cannot proceed in this pass.
func (s *instanceSync) ensureCreated(ctx context.Context) bool {
	var missing []slot
	for _, sl := range s.longRunning() {
		if _, ok := s.found[sl]; !ok {
			missing = append(missing, sl)
		}
	}
	if len(missing) == 0 {
		return true
	}
	if !s.pullMissing(ctx, missing) {
		return false
	}
	for _, sl := range missing {
		if !s.createSlot(ctx, sl) {
			return false
		}
	}
	return true
}

// createSlot creates the container of one slot, joined to the network
// owner when it shares the instance's network namespace.
func (s *instanceSync) createSlot(ctx context.Context, sl slot) bool {
	spec := s.specAt(sl)
	if joinsNetwork(s.tmpl.Spec, sl) {
		owner, _ := networkOwner(s.tmpl.Spec)
		spec.NetworkOf = s.found[owner].ID
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
	s.found[sl] = c
	return true
}

// pullMissing pulls the images of the containers to create, under the
// pull backoff, each with its own credentials (ContainerSpec.PullAuth) or
// else the device's; a pinned image only as its pin's content
// (imagepin.go), which the container is then created from.
func (s *instanceSync) pullMissing(ctx context.Context, slots []slot) bool {
	inst, now := s.inst, s.p.now
	if inst.pull.waiting(now) {
		if inst.pullMismatch {
			s.block(schema.PhaseFailed, inst.pullErr)
		} else {
			s.block(schema.PhaseImagePullBackOff, fmt.Sprintf("back-off pulling image: %s", inst.pullErr))
		}
		return false
	}
	for _, sl := range slots {
		image, err := s.a.ensureImage(ctx, s.specAt(sl), s.containerAt(sl), s.tmpl.Spec.ImageSource, s.pins, nil)
		if err != nil {
			s.pullFailed(ctx, err)
			return false
		}
		s.setImage(sl, image)
	}
	inst.pull, inst.pullErr, inst.pullMismatch = retryState{}, "", false
	return true
}

// pullFailed records a failed pull under the pull backoff: Failed with an
// ImageDigestMismatch event when the engine holds other content than the
// pinned one, ErrImagePull otherwise.
func (s *instanceSync) pullFailed(ctx context.Context, err error) {
	inst := s.inst
	inst.pull = s.a.cfg.RestartBackoff.next(inst.pull, s.p.now, 0)
	inst.pullErr = err.Error()
	inst.pullMismatch = errors.Is(err, ErrImageDigestMismatch)
	if inst.pullMismatch {
		s.a.event(ctx, schema.EventWarning, "ImageDigestMismatch", inst.key.DaemonSet, inst.pullErr)
		s.block(schema.PhaseFailed, inst.pullErr)
		return
	}
	s.a.event(ctx, schema.EventWarning, "ErrImagePull", inst.key.DaemonSet, inst.pullErr)
	s.block(schema.PhaseErrImagePull, inst.pullErr)
}

// setImage sets the image a slot's container is created from.
func (s *instanceSync) setImage(sl slot, image string) {
	if sl.init {
		s.spec.Init[sl.index].Image = image
	} else {
		s.spec.Containers[sl.index].Image = image
	}
}

// pullAuth is the credential of a container's pull: its own (from the
// template's imagePullSecrets), else the device's.
func pullAuth(spec ContainerSpec, device *RegistryAuth) *RegistryAuth {
	if spec.PullAuth != nil {
		return spec.PullAuth
	}
	return device
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
// container there is the same one (same instance and slot).
func (a *Agent) create(ctx context.Context, spec ContainerSpec) (ContainerState, error) {
	id, err := a.rt.Create(ctx, spec)
	if errors.Is(err, ErrNameConflict) {
		return a.adoptByName(ctx, spec)
	}
	if err != nil {
		// A Runtime's Create errors already name the container.
		return ContainerState{}, err
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
	for _, l := range []string{LabelManaged, LabelNode, LabelDaemonSet, LabelRevision, LabelIndex, LabelInitIndex} {
		if c.Labels[l] != spec.Labels[l] {
			return ContainerState{}, fmt.Errorf("create container %s: name in use by another container (%s %q, want %q)", spec.Name, l, c.Labels[l], spec.Labels[l])
		}
	}
	a.log.Info("adopted existing container after name conflict", "container", spec.Name)
	return c, nil
}
