package controller

import (
	"iter"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

// referenced yields the revisions nd references: the instances the node
// runs, then the ones it is asked to prefetch. The controller publishes
// the templates of both, and a node may fetch the images of both from the
// image store.
func referenced(nd reconcile.NodeDesired) iter.Seq[schema.DesiredInstance] {
	return func(yield func(schema.DesiredInstance) bool) {
		for _, in := range nd.Instances {
			if !yield(in) {
				return
			}
		}
		for _, in := range nd.Prefetch {
			if !yield(in) {
				return
			}
		}
	}
}

// prefetchView is a rollout's download counts for the API; nil for a
// daemonset without spec.rollout.prefetch.
func prefetchView(c rollout.PrefetchCounts, e *dsEntry) *api.RolloutPrefetch {
	if e.strategy.Prefetch == nil {
		return nil
	}
	return &api.RolloutPrefetch{Nodes: c.Nodes, Done: c.Done, Downloading: c.Downloading, Unsupported: c.Unsupported}
}

// instancePrefetch is the download of daemonset key's revision that cur
// asks its node for, as obs reports it (zero bytes while it reports
// nothing yet); nil when cur asks for none.
func instancePrefetch(cur reconcile.NodeDesired, obs schema.ObservedState, key string) *api.InstancePrefetch {
	for _, ask := range cur.Prefetch {
		if ask.DaemonSet != key {
			continue
		}
		out := &api.InstancePrefetch{Revision: ask.Revision}
		for _, p := range obs.Prefetch {
			if p.DaemonSet == key && p.Revision == ask.Revision {
				out.BytesDone, out.BytesTotal, out.Done, out.Error = p.BytesDone, p.BytesTotal, p.Done, p.Error
			}
		}
		return out
	}
	return nil
}
