package reconcile

import (
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// StatusBits is one node's contribution to one daemonset's status, one bit
// per count of DaemonSetStatus, so a caller can keep it per node and
// daemonset in a byte and maintain the sums incrementally: Add a node's
// bits when it is planned, Sub them when it is planned again or deleted.
// Assemble sets StatusCurrent, StatusReady, StatusAvailable, StatusUpdated
// and StatusOffline only with StatusDesired, and StatusMisscheduled only
// without it.
type StatusBits uint8

// The counts a node contributes to, as DaemonSetStatus documents them.
const (
	StatusDesired      StatusBits = 1 << iota // DesiredNumberScheduled
	StatusCurrent                             // CurrentNumberScheduled
	StatusMisscheduled                        // NumberMisscheduled
	StatusReady                               // NumberReady
	StatusAvailable                           // NumberAvailable
	StatusUpdated                             // UpdatedNumberScheduled
	StatusOffline                             // NodesOffline

	statusBitsValues = int(StatusOffline) << 1 // how many distinct StatusBits there are
)

// Add adds one node's contribution b to s. NumberUnavailable counts the
// nodes that are desired but not available, so over bits as Assemble sets
// them it stays DesiredNumberScheduled - NumberAvailable, never negative.
func (s *DaemonSetStatus) Add(b StatusBits) { s.addN(b, 1) }

// Sub removes one node's contribution b, added before, from s.
func (s *DaemonSetStatus) Sub(b StatusBits) { s.addN(b, -1) }

// addN adds n nodes' contribution b to s.
func (s *DaemonSetStatus) addN(b StatusBits, n int) {
	s.DesiredNumberScheduled += n * b.count(StatusDesired)
	s.CurrentNumberScheduled += n * b.count(StatusCurrent)
	s.NumberMisscheduled += n * b.count(StatusMisscheduled)
	s.NumberReady += n * b.count(StatusReady)
	s.NumberAvailable += n * b.count(StatusAvailable)
	s.UpdatedNumberScheduled += n * b.count(StatusUpdated)
	s.NodesOffline += n * b.count(StatusOffline)
	if b&(StatusDesired|StatusAvailable) == StatusDesired {
		s.NumberUnavailable += n
	}
}

// count returns 1 if b has bit, 0 otherwise.
func (b StatusBits) count(bit StatusBits) int {
	return int(b&bit) / int(bit)
}

// indexObserved loads the node's observed instances and links those of
// each daemonset the Planner knows (obsFirst, obsNext), so observedBits
// visits only the instances of its daemonset. Agents report instances
// sorted by daemonset, so a merge walk over the sorted daemonsets finds
// most owners; the index map resolves the rest.
func (p *Planner) indexObserved(observed []schema.InstanceStatus) {
	p.observed = observed
	p.obsDS = p.obsDS[:0]
	k := 0
	for i := range observed {
		key := observed[i].DaemonSet
		c := 1
		for k < len(p.ds) {
			if c = strings.Compare(p.ds[k].Key, key); c >= 0 {
				break
			}
			k++
		}
		if c == 0 {
			p.obsDS = append(p.obsDS, k)
			continue
		}
		j, ok := p.index[key]
		if !ok {
			j = -1
		}
		p.obsDS = append(p.obsDS, j)
	}
	p.obsFirst = slices.Grow(p.obsFirst[:0], len(p.ds))[:len(p.ds)]
	for k := range p.obsFirst {
		p.obsFirst[k] = -1
	}
	p.obsNext = slices.Grow(p.obsNext[:0], len(observed))[:len(observed)]
	for i := len(observed) - 1; i >= 0; i-- {
		if k := p.obsDS[i]; k >= 0 {
			p.obsNext[i], p.obsFirst[k] = p.obsFirst[k], i
		}
	}
}

// statusBits returns one node's contribution to the status of daemonset
// k, as the Kubernetes DaemonSet controller counts: a node that should run
// the daemonset is desired (and offline unless online), and current,
// ready, available and updated as it runs it; a node that runs it but
// should not is misscheduled. It requeues out at the instant a ready
// instance becomes available.
func (p *Planner) statusBits(k int, shouldRun, runs, online bool, out *NodeResult) StatusBits {
	if !shouldRun {
		if runs {
			return StatusMisscheduled
		}
		return 0
	}
	b := StatusDesired
	if !online {
		b |= StatusOffline
	}
	if !runs {
		return b
	}
	return b | StatusCurrent | p.observedBits(k, online, out)
}

// observedBits reports, from the node's observed instances of daemonset k,
// whether one is ready (counted only while the node is online, as
// Kubernetes marks the pods of an unreachable node not ready), whether a
// ready one has been ready for MinReadySeconds at the Planner's instant,
// and whether one runs CurrentRevision. It requeues out at the instant a
// ready instance becomes available.
func (p *Planner) observedBits(k int, online bool, out *NodeResult) StatusBits {
	ds := &p.ds[k]
	minReady := time.Duration(ds.MinReadySeconds) * time.Second
	var b StatusBits
	for i := p.obsFirst[k]; i >= 0; i = p.obsNext[i] {
		inst := &p.observed[i]
		if inst.Revision == ds.CurrentRevision {
			b |= StatusUpdated
		}
		if !inst.Ready || !online {
			continue
		}
		b |= StatusReady
		switch {
		case minReady <= 0:
			b |= StatusAvailable
		case inst.ReadySince != nil:
			at := inst.ReadySince.Add(minReady)
			if at.After(p.now) {
				out.requeue(p.now, at)
			} else {
				b |= StatusAvailable
			}
		}
	}
	return b
}
