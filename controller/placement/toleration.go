package placement

import (
	"time"

	"github.com/edgeset/edgeset/schema"
)

// toleration is one compiled toleration.
type toleration struct {
	key, value, effect string
	exists             bool          // operator Exists; otherwise Equal
	bounded            bool          // tolerationSeconds is set
	seconds            time.Duration // tolerationSeconds, at least zero
}

// tolerates reports whether t tolerates taint, exactly as Kubernetes
// Toleration.ToleratesTaint: an empty effect matches every effect, an empty
// key (which Compile admits only with Exists) matches every key, Exists
// ignores the value and Equal compares it.
func (t *toleration) tolerates(taint *schema.Taint) bool {
	if t.effect != "" && t.effect != taint.Effect {
		return false
	}
	if t.key != "" && t.key != taint.Key {
		return false
	}
	return t.exists || t.value == taint.Value
}

// deadline returns when a running instance stops tolerating taint through t:
// the taint's TimeAdded (now when the taint carries none) plus
// tolerationSeconds. ok is false when t tolerates the taint for ever.
func (t *toleration) deadline(taint *schema.Taint, now time.Time) (at time.Time, ok bool) {
	if !t.bounded {
		return time.Time{}, false
	}
	added := now
	if taint.TimeAdded != nil {
		added = *taint.TimeAdded
	}
	return added.Add(t.seconds), true
}

// firstToleration returns the index of the first toleration that tolerates
// taint, or -1. The first one decides tolerationSeconds, as in the
// Kubernetes taint eviction controller (GetMatchingTolerations).
func (p *Policy) firstToleration(taint *schema.Taint) int {
	for i := range p.tolerations {
		if p.tolerations[i].tolerates(taint) {
			return i
		}
	}
	return -1
}

// cordonTaint stands for node.Unschedulable: Kubernetes expresses a cordon
// as this taint, and every daemon tolerates it.
var cordonTaint = schema.Taint{Key: schema.TaintNodeUnschedulable, Effect: schema.TaintNoSchedule}

// daemonTolerationsAlways are added to every daemon's tolerations, in this
// order, as Kubernetes AddOrUpdateDaemonPodTolerations adds them: daemons
// survive taint-based eviction of not-ready and unreachable nodes and run on
// nodes under pressure or cordoned.
var daemonTolerationsAlways = []schema.Toleration{
	{Key: schema.TaintNodeNotReady, Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute},
	{Key: schema.TaintNodeUnreachable, Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute},
	{Key: schema.TaintNodeDiskPressure, Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule},
	{Key: schema.TaintNodeMemoryPressure, Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule},
	{Key: schema.TaintNodePIDPressure, Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule},
	{Key: schema.TaintNodeUnschedulable, Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule},
}

// daemonTolerationHostNetwork is added only to daemons on the host network,
// which need no pod network.
var daemonTolerationHostNetwork = schema.Toleration{
	Key: schema.TaintNodeNetworkUnavailable, Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule,
}

// daemonTolerations returns own merged with the tolerations every daemon
// gets, as Kubernetes AddOrUpdateDaemonPodTolerations merges them: an own
// toleration with the same key, operator, value and effect is replaced in
// place (so an own tolerationSeconds on such a toleration is dropped), any
// other is kept, and the rest are appended. own is not modified.
func daemonTolerations(own []schema.Toleration, hostNetwork bool) []schema.Toleration {
	out := make([]schema.Toleration, 0, len(own)+len(daemonTolerationsAlways)+1)
	for _, t := range own {
		out = append(out, copyToleration(t))
	}
	for _, t := range daemonTolerationsAlways {
		out = addOrUpdateToleration(out, t)
	}
	if hostNetwork {
		out = addOrUpdateToleration(out, daemonTolerationHostNetwork)
	}
	return out
}

// addOrUpdateToleration is Kubernetes AddOrUpdateTolerationInPodSpec: when
// a toleration with the same match as add is already there exactly as add
// (without tolerationSeconds), ts is returned unchanged; otherwise every
// toleration with the same match is replaced by add, or add is appended.
func addOrUpdateToleration(ts []schema.Toleration, add schema.Toleration) []schema.Toleration {
	replaced := false
	for i := range ts {
		if sameMatch(ts[i], add) && ts[i].TolerationSeconds == nil {
			return ts
		}
	}
	for i := range ts {
		if sameMatch(ts[i], add) {
			ts[i] = add
			replaced = true
		}
	}
	if !replaced {
		ts = append(ts, add)
	}
	return ts
}

// sameMatch is Kubernetes Toleration.MatchToleration: the same key,
// operator, value and effect, whatever the tolerationSeconds.
func sameMatch(a, b schema.Toleration) bool {
	return a.Key == b.Key && a.Operator == b.Operator && a.Value == b.Value && a.Effect == b.Effect
}

func copyToleration(t schema.Toleration) schema.Toleration {
	if t.TolerationSeconds != nil {
		s := *t.TolerationSeconds
		t.TolerationSeconds = &s
	}
	return t
}
