package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// PrefetchPolicy is spec.rollout.prefetch (edgeset.io/v1): download before
// switch. Every node that will run a new revision pulls its images in the
// background, while its old instance keeps running, at most
// MaxConcurrentPerSite nodes of each site at once; the rollout switches a
// node only once its images are present.
//
// In a manifest it is either a boolean (`prefetch: true`) or an object
// (`prefetch: {maxConcurrentPerSite: 3, topologyKey: site}`), which means
// enabled. It encodes back the same way: `true` when no option is set.
type PrefetchPolicy struct {
	// Enabled is false only for `prefetch: false`.
	Enabled bool
	// MaxConcurrentPerSite bounds the nodes of one site downloading at
	// once; nil is DefaultPrefetchConcurrency.
	MaxConcurrentPerSite *int32
	// TopologyKey is the node label whose values name the sites; empty is
	// the per-site budget's key (maxUnavailablePerTopology) when the
	// daemonset has one, else the controller's site-label.
	TopologyKey string
}

// prefetchObject is PrefetchPolicy's object form: the fields a manifest
// may set.
type prefetchObject struct {
	MaxConcurrentPerSite *int32 `json:"maxConcurrentPerSite,omitempty"`
	TopologyKey          string `json:"topologyKey,omitempty"`
}

// Limits of spec.rollout.prefetch.
const (
	// DefaultPrefetchConcurrency is how many nodes of one site download
	// at once when maxConcurrentPerSite is not set.
	DefaultPrefetchConcurrency = 2
	// MaxPrefetchConcurrency bounds maxConcurrentPerSite.
	MaxPrefetchConcurrency = 10000
)

// LabelPrefetch is the label an agent that prefetches announces (value
// "true"). The controller asks only such nodes to prefetch: an agent built
// before prefetch would refuse a desired state carrying the prefetch list
// (the wire decoders reject unknown fields), so a node without the label
// switches without prefetching. It is one of the agent's automatic labels.
const LabelPrefetch = "edgeset.io/prefetch"

// On reports whether the policy asks for prefetching: set and enabled.
func (p *PrefetchPolicy) On() bool { return p != nil && p.Enabled }

// Concurrency is MaxConcurrentPerSite with its default applied.
func (p *PrefetchPolicy) Concurrency() int {
	if p == nil || p.MaxConcurrentPerSite == nil {
		return DefaultPrefetchConcurrency
	}
	return int(*p.MaxConcurrentPerSite)
}

// MarshalJSON encodes `false`, `true`, or the object when an option is set.
func (p PrefetchPolicy) MarshalJSON() ([]byte, error) {
	if !p.Enabled || p.MaxConcurrentPerSite == nil && p.TopologyKey == "" {
		return json.Marshal(p.Enabled)
	}
	return json.Marshal(prefetchObject{MaxConcurrentPerSite: p.MaxConcurrentPerSite, TopologyKey: p.TopologyKey})
}

// UnmarshalJSON accepts a boolean or the object form (which enables
// prefetching); unknown fields of the object are refused.
func (p *PrefetchPolicy) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		var on bool
		if err := json.Unmarshal(b, &on); err != nil {
			return fmt.Errorf("prefetch: want true, false or an object with maxConcurrentPerSite and topologyKey: %w", err)
		}
		*p = PrefetchPolicy{Enabled: on}
		return nil
	}
	var o prefetchObject
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	*p = PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: o.MaxConcurrentPerSite, TopologyKey: o.TopologyKey}
	return nil
}

// validatePrefetchPolicy checks spec.rollout.prefetch of daemonset key.
func validatePrefetchPolicy(errs *fieldErrors, field, key string, p *PrefetchPolicy) {
	if p == nil {
		return
	}
	f := field + ".prefetch"
	if key == AgentDaemonSet && p.On() {
		errs.add(f, "not for %s: an agent upgrade runs no container image (each agent downloads its new binary when switched)", AgentDaemonSet)
	}
	if c := p.MaxConcurrentPerSite; c != nil && (*c < 1 || *c > MaxPrefetchConcurrency) {
		errs.add(f+".maxConcurrentPerSite", "must be between 1 and %d, not %d", MaxPrefetchConcurrency, *c)
	}
	if p.TopologyKey != "" {
		if problem := LabelKeyProblem(p.TopologyKey); problem != "" {
			errs.add(f+".topologyKey", "%s", problem)
		}
	}
}

// PrefetchStatus is an agent's report of one prefetch its desired state
// asks for (ObservedState.Prefetch): the images of Revision of DaemonSet,
// downloaded in the background.
type PrefetchStatus struct {
	DaemonSet string `json:"daemonSet"`
	Revision  string `json:"revision"`
	// BytesDone and BytesTotal measure the download over all its images,
	// as far as the agent knows them (BytesTotal is 0 while unknown, and
	// may grow as the engine learns the layers' sizes).
	BytesDone  int64 `json:"bytesDone"`
	BytesTotal int64 `json:"bytesTotal,omitempty"`
	// Done: every image of the revision is present.
	Done bool `json:"done,omitempty"`
	// Error is the last failure (the agent retries with back-off); empty
	// once an attempt succeeds.
	Error string `json:"error,omitempty"`
}

// validatePrefetchAsks checks a desired state's prefetch list: valid
// daemonset keys and revision hashes, one revision per daemonset.
func validatePrefetchAsks(errs *fieldErrors, asks []DesiredInstance) {
	seen := map[string]bool{}
	for i, in := range asks {
		f := fmt.Sprintf("prefetch[%d]", i)
		validateDaemonSetKey(errs, f+".daemonSet", in.DaemonSet)
		validateRevisionHash(errs, f+".revision", in.Revision)
		if seen[in.DaemonSet] {
			errs.add(f+".daemonSet", "daemonset %s is listed twice: one prefetch per daemonset", in.DaemonSet)
		}
		seen[in.DaemonSet] = true
	}
}

// validatePrefetchStatuses checks an observed state's prefetch reports.
func validatePrefetchStatuses(errs *fieldErrors, statuses []PrefetchStatus) {
	seen := map[string]bool{}
	for i, st := range statuses {
		f := fmt.Sprintf("prefetch[%d]", i)
		validateDaemonSetKey(errs, f+".daemonSet", st.DaemonSet)
		validateRevisionHash(errs, f+".revision", st.Revision)
		if st.BytesDone < 0 {
			errs.add(f+".bytesDone", "must be >= 0, not %d", st.BytesDone)
		}
		if st.BytesTotal < 0 {
			errs.add(f+".bytesTotal", "must be >= 0, not %d", st.BytesTotal)
		}
		if key := st.DaemonSet + "@" + st.Revision; seen[key] {
			errs.add(f, "duplicate report of %s revision %s", st.DaemonSet, st.Revision)
		} else {
			seen[key] = true
		}
	}
}
