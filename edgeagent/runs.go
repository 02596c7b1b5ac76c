package edgeagent

import (
	"sync"
	"time"
)

// runHistory remembers, for each managed container, its current run and
// the run before, as the agent's passes saw them. The engine keeps only
// the current run's start of a container restarted in place, so this is
// how the log of exactly the previous run (logs --previous, as the
// kubelet serves it) is found. It is in memory: after an agent restart the
// previous run of a container is known again from its next restart on.
// Safe for concurrent use.
type runHistory struct {
	mu   sync.Mutex        // guards runs
	runs map[string][2]run // container id: {previous run, current run}
}

// run is one run of a container: when it started, and when the run before
// it ended (the FinishedAt the engine shows while it runs), zero if
// unknown.
type run struct {
	start, afterEnd time.Time
}

func newRunHistory() *runHistory { return &runHistory{runs: map[string][2]run{}} }

// observe records the runs of list, the node's managed containers, and
// forgets the containers no longer in it.
func (h *runHistory) observe(list []ContainerState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(list))
	for _, c := range list {
		seen[c.ID] = true
		if c.StartedAt.IsZero() {
			continue
		}
		r := h.runs[c.ID]
		switch {
		case !r[1].start.Equal(c.StartedAt):
			r[0], r[1] = r[1], run{start: c.StartedAt}
		case !c.Running:
			continue // its FinishedAt is its own end now
		}
		if c.Running && c.FinishedAt.Before(c.StartedAt) {
			r[1].afterEnd = c.FinishedAt
		}
		h.runs[c.ID] = r
	}
	for id := range h.runs {
		if !seen[id] {
			delete(h.runs, id)
		}
	}
}

// previousRunSince returns where the log of the run before the one that
// started at current begins, if the agent saw that run start.
func (h *runHistory) previousRunSince(id string, current time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.runs[id]
	if !ok || !r[1].start.Equal(current) || r[0].start.IsZero() {
		return time.Time{}, false
	}
	return r[0].since(), true
}

// lastRunSince returns where the log of the run that started at start
// begins: that run's since when the agent saw it, else a moment before
// start.
func (h *runHistory) lastRunSince(id string, start time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.runs[id]; r[1].start.Equal(start) {
		return r[1].since()
	}
	return run{start: start}.since()
}

// since is where the run's log begins: the boundary with the run before
// when the agent saw that one end, else a moment before the run started.
func (r run) since() time.Time {
	if !r.afterEnd.IsZero() && r.afterEnd.Before(r.start) {
		return runBoundary(r.afterEnd, r.start)
	}
	return r.start.Add(-runStartSlack)
}

// runBoundary is the instant that separates, in a container's log, the
// run that ended at end from the run that started at start. Neither
// instant is exact: the engine stamps a line when it reads it, so a run's
// last lines may carry a time after it ended, and records a start once
// the process runs, so the next run's first lines may carry a time before
// it. Restarting takes the engine tens of milliseconds at least (a crash
// back-off, seconds), so the middle of the gap lies clear of both.
func runBoundary(end, start time.Time) time.Time {
	return end.Add(start.Sub(end) / 2)
}
