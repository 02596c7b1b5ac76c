package reconcile

import "time"

// indexObserved loads the observed instances of node and the position in
// p.ds of each one's daemonset (-1 for one Plan does not know), so count
// matches them by integer instead of by key. Agents report instances
// sorted by daemonset, so a merge walk over the sorted daemonsets finds
// most positions; the index map resolves the rest.
func (p *planner) indexObserved(node string) {
	p.observed = p.in.Observed[node].Instances
	p.obsDS = p.obsDS[:0]
	k := 0
	for i := range p.observed {
		key := p.observed[i].DaemonSet
		for k < len(p.ds) && p.ds[k].Key < key {
			k++
		}
		if k < len(p.ds) && p.ds[k].Key == key {
			p.obsDS = append(p.obsDS, k)
			continue
		}
		j, ok := p.index[key]
		if !ok {
			j = -1
		}
		p.obsDS = append(p.obsDS, j)
	}
}

// count adds one node's placement of daemonset k to its status, as the
// Kubernetes DaemonSet controller counts: a node that should run the
// daemonset is desired, and current, ready, available and updated as it
// runs it; a node that runs it but should not is misscheduled.
func (p *planner) count(k int, shouldRun, runs, online bool) {
	st := &p.status[k]
	if !shouldRun {
		if runs {
			st.NumberMisscheduled++
		}
		return
	}
	st.DesiredNumberScheduled++
	if !online {
		st.NodesOffline++
	}
	if !runs {
		return
	}
	st.CurrentNumberScheduled++
	ready, available, updated := p.observedState(k, online)
	if ready {
		st.NumberReady++
	}
	if available {
		st.NumberAvailable++
	}
	if updated {
		st.UpdatedNumberScheduled++
	}
}

// observedState reports, from the node's observed instances of daemonset k,
// whether one is ready (counted only while the node is online, as
// Kubernetes marks the pods of an unreachable node not ready), whether a
// ready one has been ready for MinReadySeconds at Now, and whether one runs
// CurrentRevision. It requeues at the instant a ready instance becomes
// available.
func (p *planner) observedState(k int, online bool) (ready, available, updated bool) {
	ds := &p.ds[k]
	minReady := time.Duration(ds.MinReadySeconds) * time.Second
	for i, owner := range p.obsDS {
		if owner != k {
			continue
		}
		inst := &p.observed[i]
		updated = updated || inst.Revision == ds.CurrentRevision
		if !inst.Ready || !online {
			continue
		}
		ready = true
		switch {
		case minReady <= 0:
			available = true
		case inst.ReadySince != nil:
			at := inst.ReadySince.Add(minReady)
			if at.After(p.in.Now) {
				p.requeue(at)
			} else {
				available = true
			}
		}
	}
	return ready, available, updated
}

// finishStatus fills Output.Status with every non-orphan daemonset's
// counts.
func (p *planner) finishStatus() {
	p.out.Status = make(map[string]DaemonSetStatus, len(p.ds))
	for k := range p.ds {
		if p.ds[k].Orphan {
			continue
		}
		st := p.status[k]
		st.NumberUnavailable = max(st.DesiredNumberScheduled-st.NumberAvailable, 0)
		p.out.Status[p.ds[k].Key] = st
	}
}
