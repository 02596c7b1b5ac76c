package edgeagent

import (
	"context"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// runInit advances the instance's init containers, as Kubernetes runs a
// pod's: in template order, each to completion (exit 0) before the next
// is created, a failed one restarted under the crash backoff; a sidecar
// (restartPolicy Always) only has to be started (postStart hook done,
// startup probe passed) and keeps running. It reports true when every
// init container is done, so the main containers may be created.
// Completed init containers are kept, exited: their presence beside a
// main container is what says the instance is initialized.
func (s *instanceSync) runInit(ctx context.Context) bool {
	for i := range s.spec.Init {
		sl := initSlot(i)
		if _, ok := s.found[sl]; !ok {
			if !s.pullMissing(ctx, []slot{sl}) || !s.createSlot(ctx, sl) {
				return false
			}
		}
		done := false
		if isSidecar(s.tmpl.Spec, sl) {
			done = s.sidecarStarted(ctx, sl)
		} else {
			done = s.initCompleted(ctx, sl)
		}
		if !done {
			return false
		}
	}
	return true
}

// initCompleted starts or restarts the init container in sl as needed and
// reports whether it has completed.
func (s *instanceSync) initCompleted(ctx context.Context, sl slot) bool {
	c := s.found[sl]
	switch {
	case c.Running:
		s.seenRunning(c)
		s.blockInitializing(sl)
		return false
	case !c.StartedAt.IsZero() && c.ExitCode == 0 && !c.OOMKilled:
		delete(s.inst.runningSince, c.ID)
		return true
	}
	if s.mayStart(ctx, sl) && s.startOne(ctx, sl) {
		s.blockInitializing(sl)
	}
	return false
}

// sidecarStarted starts or restarts the sidecar in sl as needed and
// reports whether it has started, so that the next init container may.
func (s *instanceSync) sidecarStarted(ctx context.Context, sl slot) bool {
	c := s.found[sl]
	if c.Running {
		s.seenRunning(c)
	} else if !s.mayStart(ctx, sl) || !s.startOne(ctx, sl) {
		return false
	}
	c = s.found[sl]
	if kr, kill := s.killFor(c); kill {
		s.inst.killReason[c.ID] = kr
		if err := s.a.stopContainer(ctx, s.found, c, s.specAt(sl).StopTimeout); err != nil {
			s.a.log.Warn("stop sidecar to restart it failed", "container", c.Name, "err", err)
		}
		s.block(schema.PhaseInitializing, fmt.Sprintf("restarting sidecar %q: %s", s.containerAt(sl).Name, kr.message))
		return false
	}
	if !s.started(sl, c) {
		s.block(schema.PhaseInitializing, fmt.Sprintf("waiting for sidecar %q to start", s.containerAt(sl).Name))
		return false
	}
	return true
}

// blockInitializing reports the instance Initializing, running the init
// container in sl.
func (s *instanceSync) blockInitializing(sl slot) {
	s.block(schema.PhaseInitializing, fmt.Sprintf("running init container %q (%d of %d)", s.containerAt(sl).Name, sl.index+1, len(s.spec.Init)))
}
