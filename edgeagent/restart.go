package edgeagent

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// applyKills stops the running containers that must restart: a liveness or
// startup probe failed in their current run, or their postStart hook
// failed. startContainers then counts and restarts them.
func (s *instanceSync) applyKills(ctx context.Context) {
	for _, sl := range s.longRunning() {
		c, ok := s.found[sl]
		if !ok || !c.Running {
			continue
		}
		kr, kill := s.killFor(c)
		if !kill {
			continue
		}
		s.inst.killReason[c.ID] = kr
		if err := s.a.stopContainer(ctx, s.found, c, s.specAt(sl).StopTimeout); err != nil {
			s.a.log.Warn("stop container to restart it failed", "container", c.Name, "err", err)
		}
		if st, err := s.a.rt.Inspect(ctx, c.ID); err == nil {
			s.found[sl] = st
		}
	}
}

// killFor says whether the current run of c must be killed, and why.
func (s *instanceSync) killFor(c ContainerState) (killReason, bool) {
	if f, ok := s.p.failures[c.ID]; ok && f.startedAt.Equal(c.StartedAt) {
		return killReason{reason: "Unhealthy", message: f.message}, true
	}
	if done, err := s.a.hooks.result(c.ID, c.StartedAt); done && err != nil {
		return killReason{reason: "FailedPostStartHook", message: "postStart hook failed: " + err.Error()}, true
	}
	return killReason{}, false
}

// startContainers starts, in order (sidecars, then main containers), what
// was never started, what this agent finds exited without having seen it
// run (a rebooted device), and restarts what exited under the crash
// backoff.
func (s *instanceSync) startContainers(ctx context.Context) {
	for _, sl := range s.longRunning() {
		c := s.found[sl]
		if c.Running {
			s.seenRunning(c)
			continue
		}
		if s.mayStart(ctx, sl) && !s.start(ctx, sl) {
			return
		}
	}
}

func (s *instanceSync) seenRunning(c ContainerState) {
	if _, seen := s.inst.runningSince[c.ID]; !seen {
		s.inst.runningSince[c.ID] = s.p.now
	}
}

// mayStart records a crash the first time an exited container is seen and
// reports whether the backoff allows starting it now.
func (s *instanceSync) mayStart(ctx context.Context, sl slot) bool {
	c := s.found[sl]
	_, seenRunning := s.inst.runningSince[c.ID]
	_, counted := s.inst.exited[c.ID]
	if !counted && (c.StartedAt.IsZero() || !seenRunning) {
		// Never started, or exited before this agent saw it run (a
		// rebooted device); a start that failed was counted (startFailed)
		// and waits for its back-off.
		return true
	}
	s.recordExit(ctx, sl, c)
	if !s.inst.crash.waiting(s.p.now) {
		return true
	}
	s.blockCrashed(sl, c)
	return false
}

// blockCrashed reports the instance waiting to restart the exited c:
// during initialization Init:Error after the first failure and
// Init:CrashLoopBackOff after more, else CrashLoopBackOff.
func (s *instanceSync) blockCrashed(sl slot, c ContainerState) {
	failures := s.inst.crash.failures
	regularInit := sl.init && !isSidecar(s.tmpl.Spec, sl)
	msg := s.inst.exited[c.ID]
	if !regularInit || failures > 1 {
		delay := s.a.cfg.RestartBackoff.Delay(failures)
		msg += fmt.Sprintf("; back-off %s restarting failed %s", delay, containerWho(regularInit, s.containerAt(sl).Name))
	}
	switch {
	case s.initializing && failures <= 1:
		s.block(schema.PhaseInitError, msg)
	case s.initializing:
		s.block(schema.PhaseInitCrashLoopBackOff, msg)
	default:
		s.block(schema.PhaseCrashLoopBackOff, msg)
	}
}

// recordExit counts an exit once: restarts, last exit code, how it ended
// (with the termination message), backoff, event.
func (s *instanceSync) recordExit(ctx context.Context, sl slot, c ContainerState) {
	inst, now := s.inst, s.p.now
	if _, counted := inst.exited[c.ID]; counted {
		return
	}
	ranFor := now.Sub(inst.runningSince[c.ID])
	delete(inst.runningSince, c.ID)
	inst.crash = s.a.cfg.RestartBackoff.next(inst.crash, now, ranFor)
	inst.restarts++
	code := int32(c.ExitCode)
	inst.lastExitCode = &code
	tc := s.containerAt(sl)
	regularInit := sl.init && !isSidecar(s.tmpl.Spec, sl)
	summary, msg := describeExit(regularInit, tc.Name, c, s.a.terminationMessage(ctx, c, tc))
	reason := "Crashed"
	if c.OOMKilled {
		reason = "OOMKilled"
	}
	if kr, ok := inst.killReason[c.ID]; ok {
		reason, msg = kr.reason, fmt.Sprintf("%s restarted: %s", containerWho(regularInit, tc.Name), kr.message)
		summary = msg
		delete(inst.killReason, c.ID)
	}
	inst.exited[c.ID] = summary
	s.a.event(ctx, schema.EventWarning, reason, inst.key.DaemonSet, msg)
}

// start starts the container in sl; restarting the network owner restarts
// the running containers that joined it, whose namespace went with it. It
// reports false on failure.
func (s *instanceSync) start(ctx context.Context, sl slot) bool {
	restarted := !s.found[sl].StartedAt.IsZero()
	if !s.startOne(ctx, sl) {
		return false
	}
	if owner, ok := networkOwner(s.tmpl.Spec); !ok || sl != owner || !restarted {
		return true
	}
	for _, f := range s.longRunning() {
		c, ok := s.found[f]
		if !ok || !c.Running || !joinsNetwork(s.tmpl.Spec, f) {
			continue
		}
		if err := s.a.stopContainer(ctx, s.found, c, s.specAt(f).StopTimeout); err != nil {
			s.a.log.Warn("stop follower container failed", "container", c.Name, "err", err)
		}
		if !s.startOne(ctx, f) {
			return false
		}
	}
	return true
}

// startOne starts one container (a fresh termination log for a restart)
// and runs its postStart hook in the background.
func (s *instanceSync) startOne(ctx context.Context, sl slot) bool {
	c := s.found[sl]
	if !c.StartedAt.IsZero() {
		s.a.clearTerminationLog(c)
	}
	s.a.clearLeftoverLock(s.inst.key, s.found)
	if err := s.a.rt.Start(ctx, c.ID); err != nil {
		msg := fmt.Sprintf("start container %s: %v", c.Name, err)
		if errors.Is(err, ErrUnavailable) {
			s.blockOn(err, msg)
		} else {
			s.startFailed(ctx, sl, msg)
		}
		return false
	}
	st, err := s.a.rt.Inspect(ctx, c.ID)
	if err != nil {
		s.blockOn(err, fmt.Sprintf("inspect started container %s: %v", c.Name, err))
		return false
	}
	s.found[sl] = st
	delete(s.inst.exited, c.ID)
	s.inst.runningSince[c.ID] = s.p.now
	if lc := s.containerAt(sl).Lifecycle; lc != nil && lc.PostStart != nil {
		s.a.hooks.postStart(ctx, s.target(sl, st), *lc.PostStart)
	}
	return true
}

// startFailed counts a start the engine refused (the OCI runtime could not
// set the container up: capabilities it may not grant, a device or a mount
// it cannot provide) as the kubelet counts a StartError: a restart under the
// crash back-off with an event, reported as CrashLoopBackOff with the
// engine's reason, rather than a new attempt at every pass.
func (s *instanceSync) startFailed(ctx context.Context, sl slot, msg string) {
	inst, c := s.inst, s.found[sl]
	inst.crash = s.a.cfg.RestartBackoff.next(inst.crash, s.p.now, 0)
	inst.restarts++
	code := int32(startErrorExitCode)
	inst.lastExitCode = &code
	inst.exited[c.ID] = "StartError: " + msg
	s.a.event(ctx, schema.EventWarning, "StartError", inst.key.DaemonSet, msg)
	s.blockCrashed(sl, c)
}

// startErrorExitCode is the exit code the engine and the kubelet give a
// container that could not start.
const startErrorExitCode = 128

// target is what probes and hooks of the container in sl reach.
func (s *instanceSync) target(sl slot, c ContainerState) probeTarget {
	return probeTarget{id: c.ID, startedAt: c.StartedAt, host: hookHost(s.tmpl.Spec, s.found, sl, c), ports: s.containerAt(sl).Ports}
}

// status reports the instance: blocked with the blocking step's phase, else
// Running once every long-running container runs, ready when each has
// started (postStart hook done, startup probe passed) and passes its
// readiness probe.
func (s *instanceSync) status(ctx context.Context) schema.InstanceStatus {
	s.ensureProbes(ctx)
	now := s.p.now
	switch {
	case s.phase == schema.PhaseFailed:
		return s.a.fail(ctx, s.inst, s.found, s.message, now)
	case s.phase == schema.PhaseCreateContainerConfigError:
		return s.a.configRefused(ctx, s.inst, s.found, s.message, now)
	case s.phase != "":
		return s.inst.status(s.phase, s.message, false, s.found, now)
	case !s.longRunningUp():
		return s.inst.status(schema.PhasePending, "starting", false, s.found, now)
	}
	return s.inst.status(schema.PhaseRunning, "", s.ready(), s.found, now)
}

// longRunningUp reports whether every sidecar and main container runs.
func (s *instanceSync) longRunningUp() bool {
	for _, sl := range s.longRunning() {
		if c, ok := s.found[sl]; !ok || !c.Running {
			return false
		}
	}
	return true
}

// ensureProbes keeps the probe workers of every running sidecar and main
// container whose postStart hook is done: its startup probe until it
// succeeds, then its readiness and liveness probes.
func (s *instanceSync) ensureProbes(ctx context.Context) {
	for _, sl := range s.longRunning() {
		c, ok := s.found[sl]
		if !ok || !c.Running || !s.a.hooks.passed(c.ID, c.StartedAt) {
			continue
		}
		tc, target := s.containerAt(sl), s.target(sl, c)
		if tc.StartupProbe != nil {
			s.ensureProbe(ctx, probeKey{id: c.ID, kind: startup}, target, *tc.StartupProbe)
			if !s.a.probes.isStarted(c.ID, c.StartedAt) {
				continue
			}
		}
		if tc.ReadinessProbe != nil {
			s.ensureProbe(ctx, probeKey{id: c.ID, kind: readiness}, target, *tc.ReadinessProbe)
		}
		if tc.LivenessProbe != nil {
			s.ensureProbe(ctx, probeKey{id: c.ID, kind: liveness}, target, *tc.LivenessProbe)
		}
	}
}

func (s *instanceSync) ensureProbe(ctx context.Context, k probeKey, target probeTarget, pr schema.Probe) {
	s.p.active[k] = true
	s.a.probes.ensure(ctx, k, target, pr)
}

// started reports whether the running container c in sl counts as started:
// its postStart hook is done and its startup probe, if any, passed.
func (s *instanceSync) started(sl slot, c ContainerState) bool {
	if !c.Running || !s.a.hooks.passed(c.ID, c.StartedAt) {
		return false
	}
	return s.containerAt(sl).StartupProbe == nil || s.a.probes.isStarted(c.ID, c.StartedAt)
}

func (s *instanceSync) ready() bool {
	for _, sl := range s.longRunning() {
		c := s.found[sl]
		if !s.started(sl, c) {
			return false
		}
		if rp := s.containerAt(sl).ReadinessProbe; rp != nil && !s.a.probes.isReady(c.ID, c.StartedAt) {
			return false
		}
	}
	return true
}
