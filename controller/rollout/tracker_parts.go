package rollout

import (
	"math/bits"
	"time"
)

// part is a member's share of the counts, as of its last decision.
type part struct {
	phase    uint8 // a phaseCode; 0: not counted yet
	flags    uint8
	pf       prefetchFlags
	windows  uint16 // the member's maintenance windows
	domain   uint32 // the member's topology domain (Tracker.domains)
	pfDomain uint32 // the member's prefetch site (Tracker.domains)
}

// Phases as stored in a part.
const (
	codeNone uint8 = iota
	codeOffline
	codeUpdated
	codeFailed
	codeUpdating
	codeWaiting
	codeWaitingForWindow
	codeHeldByLock
	codeWaitingForPrefetch
)

var phaseOfCode = [...]Phase{codeOffline: PhaseOffline, codeUpdated: PhaseUpdated, codeFailed: PhaseFailed,
	codeUpdating: PhaseUpdating, codeWaiting: PhaseWaiting, codeWaitingForWindow: PhaseWaitingForWindow,
	codeHeldByLock: PhaseHeldByLock, codeWaitingForPrefetch: PhaseWaitingForPrefetch}

// Flags of a part.
const (
	flagUnavailable        uint8 = 1 << iota // spends budget (pass.inFlight)
	flagWaitingAvailable                     // waits on an older revision, available
	flagWaitingUnavailable                   // waits on an older revision, unavailable
	flagSurging                              // assigned a surge pair
	flagOnTarget                             // assigned the target
	flagStaleLock                            // its update lock is stale (State.StaleLocks)
)

func makePart(phase Phase, unavailable, waiting, available, surging, onTarget bool) part {
	pt := part{}
	for code, ph := range phaseOfCode {
		if ph == phase && code != int(codeNone) {
			pt.phase = uint8(code)
		}
	}
	set := func(flag uint8, on bool) {
		if on {
			pt.flags |= flag
		}
	}
	set(flagUnavailable, unavailable)
	set(flagWaitingAvailable, waiting && available)
	set(flagWaitingUnavailable, waiting && !available)
	set(flagSurging, surging)
	set(flagOnTarget, onTarget)
	return pt
}

// totals sums parts: the status counts and what update's budget reads.
type totals struct {
	status             Status // Offline, Updated, Updating, Waiting, WaitingForWindow, HeldByLock, StaleLocks, Unavailable
	waiting            int
	waitingUnavailable int
	surging            int
	onTarget           int
	// domains sums the parts by topology domain (by Tracker.domains id);
	// windowWaiting counts, by window, the members waiting for it.
	domains       []domainTotals
	windowWaiting [16]int
	// pfDomains sums the parts' downloads by prefetch site (by
	// Tracker.domains id); pfHolders and pfCandidates over every site.
	pfDomains               []prefetchTotals
	pfHolders, pfCandidates int
}

// domainTotals are one topology domain's parts, summed.
type domainTotals struct {
	total            int
	unavailable      int
	surging          int
	waitingAvailable int
}

// add counts pt delta times (1 or -1); a part not counted yet adds nothing.
func (s *totals) add(pt part, delta int) {
	if pt.phase == codeNone {
		return
	}
	s.status.add(phaseOfCode[pt.phase], pt.flags&flagUnavailable != 0, delta)
	count := func(flag uint8, n *int) {
		if pt.flags&flag != 0 {
			*n += delta
		}
	}
	count(flagWaitingAvailable, &s.waiting)
	count(flagWaitingUnavailable, &s.waiting)
	count(flagWaitingUnavailable, &s.waitingUnavailable)
	count(flagSurging, &s.surging)
	count(flagOnTarget, &s.onTarget)
	count(flagStaleLock, &s.status.StaleLocks)
	for int(pt.domain) >= len(s.domains) {
		s.domains = append(s.domains, domainTotals{})
	}
	d := &s.domains[pt.domain]
	d.total += delta
	count(flagUnavailable, &d.unavailable)
	count(flagSurging, &d.surging)
	count(flagWaitingAvailable, &d.waitingAvailable)
	if pt.phase == codeWaitingForWindow {
		for mask := pt.windows; mask != 0; mask &= mask - 1 {
			s.windowWaiting[bits.TrailingZeros16(mask)] += delta
		}
	}
	s.addPrefetch(pt, delta)
}

// entries are one node's entries in a State's maps.
type entries struct {
	progress                      progress
	failed                        string
	hasProgress, hasFailed        bool
	away, hasAway                 bool
	staleLock, lockOverride       time.Time
	hasStaleLock, hasLockOverride bool
}

func entriesOf(st *State, node string) entries {
	e := entries{}
	e.progress, e.hasProgress = st.progress[node]
	e.failed, e.hasFailed = st.Failed[node]
	e.away, e.hasAway = st.Away[node]
	e.staleLock, e.hasStaleLock = st.StaleLocks[node]
	e.lockOverride, e.hasLockOverride = st.LockOverrides[node]
	return e
}

// held reports whether e holds an entry in any map.
func (e entries) held() bool {
	return e.hasProgress || e.hasFailed || e.hasAway || e.hasStaleLock || e.hasLockOverride
}

// restore puts e back into st's maps (a map that is nil held no entry).
func (e entries) restore(st *State, node string) {
	restoreEntry(st.progress, node, e.progress, e.hasProgress)
	restoreEntry(st.Failed, node, e.failed, e.hasFailed)
	restoreEntry(st.Away, node, e.away, e.hasAway)
	restoreEntry(st.StaleLocks, node, e.staleLock, e.hasStaleLock)
	restoreEntry(st.LockOverrides, node, e.lockOverride, e.hasLockOverride)
}

func restoreEntry[V any](m map[string]V, node string, v V, ok bool) {
	switch {
	case m == nil:
	case ok:
		m[node] = v
	default:
		delete(m, node)
	}
}

func (e entries) equal(o entries) bool {
	return e.hasProgress == o.hasProgress && e.progress == o.progress &&
		e.hasFailed == o.hasFailed && e.failed == o.failed &&
		e.hasAway == o.hasAway && e.away == o.away &&
		e.hasStaleLock == o.hasStaleLock && e.staleLock.Equal(o.staleLock) &&
		e.hasLockOverride == o.hasLockOverride && e.lockOverride.Equal(o.lockOverride)
}

// scalarsEqual compares every field of two states but their maps.
func scalarsEqual(a, b State) bool {
	return a.Target == b.Target && a.Stable == b.Stable && a.Previous == b.Previous &&
		a.Paused == b.Paused && a.PauseReason == b.PauseReason && a.OperatorPaused == b.OperatorPaused &&
		a.RolledBackFrom == b.RolledBackFrom && a.RollbackReason == b.RollbackReason &&
		a.CanaryPromoted == b.CanaryPromoted && a.CanaryAvailableSince.Equal(b.CanaryAvailableSince) &&
		a.Complete == b.Complete
}
