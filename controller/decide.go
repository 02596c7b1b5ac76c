package controller

import (
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

// snapshot is the fleet as one reconcile pass decides on it.
type snapshot struct {
	Now           time.Time
	Nodes         []schema.Node
	NodesChangeAt time.Time
	DaemonSets    []dsSnapshot
	Current       map[string]reconcile.NodeDesired
	Observed      map[string]schema.ObservedState
	Online        map[string]bool
	OfflineSince  map[string]time.Time
	Configs       reconcile.Configs
}

// dsSnapshot is one daemonset as a pass sees it.
type dsSnapshot struct {
	Key             string
	Policy          *placement.Policy
	Revision        string // the current template's hash
	MinReadySeconds int32
	Strategy        rollout.Strategy
	Rollout         rollout.State
	Orphan          bool
}

// decision is what one pass decided.
type decision struct {
	Plan      reconcile.Output
	Rollouts  map[string]rollout.Decision
	RequeueAt time.Time
}

// decide is the controller's pure decision: placement says which nodes run
// each daemonset, the rollout says which revision each of them runs. It
// plans twice: the first plan only collects, per daemonset, the nodes that
// run it and what they were last asked to run; rollout.Step then decides
// every daemonset's revisions over its whole set of nodes (the budget is
// fleet-wide), and the second plan places them.
func decide(s snapshot) decision {
	collected := collect(s)
	d := decision{Rollouts: make(map[string]rollout.Decision, len(s.DaemonSets))}
	for _, ds := range s.DaemonSets {
		if ds.Orphan {
			continue
		}
		st := ds.Rollout.Retarget(ds.Revision)
		d.Rollouts[ds.Key] = rollout.Step(s.Now, ds.Strategy, st, collected[ds.Key])
	}
	d.Plan = reconcile.Plan(planInput(s, func(ds dsSnapshot) reconcile.RevisionFunc {
		assign := d.Rollouts[ds.Key].Assign
		target := d.Rollouts[ds.Key].State.Target
		return func(node string, _ []schema.DesiredInstance) []string {
			if revs, ok := assign[node]; ok {
				return revs
			}
			return []string{target}
		}
	}))
	d.RequeueAt = d.Plan.RequeueAt
	for _, r := range d.Rollouts {
		d.RequeueAt = earliest(d.RequeueAt, r.RequeueAt)
	}
	return d
}

// collect runs a plan whose only purpose is to learn, per daemonset, the
// nodes that are to run it, as rollout nodes.
func collect(s snapshot) map[string][]rollout.Node {
	out := make(map[string][]rollout.Node, len(s.DaemonSets))
	reconcile.Plan(planInput(s, func(ds dsSnapshot) reconcile.RevisionFunc {
		return func(node string, have []schema.DesiredInstance) []string {
			out[ds.Key] = append(out[ds.Key], rolloutNode(s, ds.Key, node, have))
			return []string{ds.Revision}
		}
	}))
	return out
}

// planInput builds reconcile's input with the revision function revs gives
// each daemonset.
func planInput(s snapshot, revs func(dsSnapshot) reconcile.RevisionFunc) reconcile.Input {
	in := reconcile.Input{
		Now:           s.Now,
		Nodes:         s.Nodes,
		NodesChangeAt: s.NodesChangeAt,
		Current:       s.Current,
		Observed:      s.Observed,
		Online:        s.Online,
		Configs:       s.Configs,
		DaemonSets:    make([]reconcile.DaemonSetState, 0, len(s.DaemonSets)),
	}
	for _, ds := range s.DaemonSets {
		st := reconcile.DaemonSetState{
			Key:             ds.Key,
			CurrentRevision: ds.Revision,
			MinReadySeconds: ds.MinReadySeconds,
			Orphan:          ds.Orphan,
		}
		if !ds.Orphan {
			st.Policy = ds.Policy
			st.Revisions = revs(ds)
		}
		in.DaemonSets = append(in.DaemonSets, st)
	}
	return in
}

// rolloutNode describes node for the rollout of daemonset key.
func rolloutNode(s snapshot, key, node string, have []schema.DesiredInstance) rollout.Node {
	n := rollout.Node{Name: node, Online: s.Online[node], OfflineSince: s.OfflineSince[node]}
	for _, in := range have {
		n.Assigned = append(n.Assigned, in.Revision)
	}
	for _, obs := range s.Observed[node].Instances {
		if obs.DaemonSet != key {
			continue
		}
		inst := rollout.Instance{Revision: obs.Revision, Ready: obs.Ready, Phase: obs.Phase, Message: obs.Message}
		if obs.ReadySince != nil {
			inst.ReadySince = *obs.ReadySince
		}
		n.Observed = append(n.Observed, inst)
	}
	slices.Sort(n.Assigned)
	return n
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
