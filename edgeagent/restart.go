package edgeagent

import (
	"context"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// applyLiveness stops the containers whose liveness probe failed in their
// current run; startContainers then counts and restarts them.
func (s *instanceSync) applyLiveness(ctx context.Context) {
	for i, c := range s.found {
		f, ok := s.p.failures[c.ID]
		if !ok || !c.Running || !f.startedAt.Equal(c.StartedAt) {
			continue
		}
		s.inst.killReason[c.ID] = f.message
		if err := s.a.rt.Stop(ctx, c.ID, s.specs[i].StopTimeout); err != nil {
			s.a.log.Warn("stop unhealthy container failed", "container", c.Name, "err", err)
		}
		if st, err := s.a.rt.Inspect(ctx, c.ID); err == nil {
			s.found[i] = st
		}
	}
}

// startContainers starts what was never started, what this agent finds
// exited without having seen it run (a rebooted device), and restarts what
// exited under the crash backoff.
func (s *instanceSync) startContainers(ctx context.Context) {
	for i := range s.specs {
		c := s.found[i]
		if c.Running {
			if _, seen := s.inst.runningSince[c.ID]; !seen {
				s.inst.runningSince[c.ID] = s.p.now
			}
			continue
		}
		if s.mayStart(ctx, c) && !s.start(ctx, i) {
			return
		}
	}
}

// mayStart records a crash the first time an exited container is seen and
// reports whether the backoff allows starting it now.
func (s *instanceSync) mayStart(ctx context.Context, c ContainerState) bool {
	_, seenRunning := s.inst.runningSince[c.ID]
	if c.StartedAt.IsZero() || !seenRunning && !s.inst.exited[c.ID] {
		return true
	}
	s.recordExit(ctx, c)
	if s.inst.crash.waiting(s.p.now) {
		delay := s.a.cfg.RestartBackoff.Delay(s.inst.crash.failures)
		s.block(schema.PhaseCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container %s", delay, c.Labels[LabelContainer]))
		return false
	}
	return true
}

// recordExit counts an exit once: restarts, last exit code, backoff, event.
func (s *instanceSync) recordExit(ctx context.Context, c ContainerState) {
	inst, now := s.inst, s.p.now
	if inst.exited[c.ID] {
		return
	}
	inst.exited[c.ID] = true
	ranFor := now.Sub(inst.runningSince[c.ID])
	delete(inst.runningSince, c.ID)
	inst.crash = s.a.cfg.RestartBackoff.next(inst.crash, now, ranFor)
	inst.restarts++
	code := int32(c.ExitCode)
	inst.lastExitCode = &code
	reason, msg := "Crashed", fmt.Sprintf("container %s exited with code %d", c.Labels[LabelContainer], code)
	if kr, ok := inst.killReason[c.ID]; ok {
		reason, msg = "Unhealthy", fmt.Sprintf("container %s restarted: %s", c.Labels[LabelContainer], kr)
		delete(inst.killReason, c.ID)
	}
	s.a.event(ctx, schema.EventWarning, reason, inst.key.DaemonSet, msg)
}

// start starts container i; restarting the network owner restarts its
// followers, whose namespace went with it. It reports false on failure.
func (s *instanceSync) start(ctx context.Context, i int) bool {
	restarted := !s.found[i].StartedAt.IsZero()
	if !s.startOne(ctx, i) {
		return false
	}
	if i == 0 && restarted && SharesNetwork(s.tmpl) {
		for j := 1; j < len(s.specs); j++ {
			if c, ok := s.found[j]; ok && c.Running {
				if err := s.a.rt.Stop(ctx, c.ID, s.specs[j].StopTimeout); err != nil {
					s.a.log.Warn("stop follower container failed", "container", c.Name, "err", err)
				}
				if !s.startOne(ctx, j) {
					return false
				}
			}
		}
	}
	return true
}

func (s *instanceSync) startOne(ctx context.Context, i int) bool {
	c := s.found[i]
	if err := s.a.rt.Start(ctx, c.ID); err != nil {
		s.blockOn(err, fmt.Sprintf("start container %s: %v", c.Name, err))
		return false
	}
	st, err := s.a.rt.Inspect(ctx, c.ID)
	if err != nil {
		s.blockOn(err, fmt.Sprintf("inspect started container %s: %v", c.Name, err))
		return false
	}
	s.found[i] = st
	delete(s.inst.exited, c.ID)
	s.inst.runningSince[c.ID] = s.p.now
	return true
}

// status reports the instance: blocked with the blocking step's phase, else
// Running once every container runs, ready when every readiness probe
// passes.
func (s *instanceSync) status(ctx context.Context) schema.InstanceStatus {
	s.ensureProbes(ctx)
	now := s.p.now
	switch {
	case s.phase == schema.PhaseFailed:
		return s.a.fail(ctx, s.inst, s.found, s.message, now)
	case s.phase != "":
		return s.inst.status(s.phase, s.message, false, s.found, now)
	case len(s.found) < len(s.specs) || !allRunning(s.found):
		return s.inst.status(schema.PhasePending, "starting", false, s.found, now)
	}
	return s.inst.status(schema.PhaseRunning, "", s.ready(), s.found, now)
}

// ensureProbes keeps a probe worker per probe of every running container.
func (s *instanceSync) ensureProbes(ctx context.Context) {
	for i, c := range s.found {
		if !c.Running || i >= len(s.specs) {
			continue
		}
		tc := s.tmpl.Spec.Containers[i]
		target := probeTarget{id: c.ID, startedAt: c.StartedAt, host: s.probeHost(c), ports: tc.Ports}
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

// probeHost is 127.0.0.1 with host networking, else the address of the
// container owning the instance's network namespace.
func (s *instanceSync) probeHost(c ContainerState) string {
	if s.tmpl.Spec.HostNetwork {
		return "127.0.0.1"
	}
	if owner, ok := s.found[0]; ok && SharesNetwork(s.tmpl) && owner.IPAddress != "" {
		return owner.IPAddress
	}
	if c.IPAddress != "" {
		return c.IPAddress
	}
	return "127.0.0.1"
}

func (s *instanceSync) ready() bool {
	for i, c := range s.found {
		if rp := s.tmpl.Spec.Containers[i].ReadinessProbe; rp != nil && !s.a.probes.isReady(c.ID, c.StartedAt) {
			return false
		}
	}
	return true
}
