package registry

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Registry holds the NodeInput of every node the controller knows of, fed by
// the agents' status and online messages and by the operator's overrides.
// It is safe for concurrent use and pure apart from its mutex: it never reads
// the clock, every method that needs the time takes now. Values passed in
// and returned are copies, except the read-only nodes of Snapshot.
type Registry struct {
	mu    sync.Mutex
	nodes map[string]*record // guarded by mu
}

// record is one node's input and bookkeeping.
type record struct {
	in       NodeInput
	lastSeen time.Time // last status or presence message accepted
	// pastSessions are sessions of the node that a later one replaced,
	// oldest first, at most maxPastSessions: a presence message of one of
	// them is a late message of a connection that is over.
	pastSessions []int64
	// displaced is the session, online until then, that the will of a
	// session never seen online replaced (0: none). That will may be a
	// late one of a connection that died before announcing itself, so
	// displaced is not over yet: its online again (the agent announces
	// once more after its connection settled) makes it current again.
	displaced int64

	// cache is the effective node of in for grace, valid for instants in
	// [from, until) (zero bounds are open); nil when not computed. Any
	// change to in clears it. It is replaced, never modified: Model hands
	// it out.
	cache       *schema.Node
	cacheGrace  time.Duration
	from, until time.Time
}

// effective returns Effective(rec.in, now, grace), computing it only when
// the input changed or now left the window in which the result holds. The
// result shares rec.in.Status's maps and slices (a status is replaced
// whole, never modified in place): it is read-only.
func (rec *record) effective(now time.Time, grace time.Duration) (*schema.Node, time.Time) {
	if rec.cache == nil || rec.cacheGrace != grace ||
		!rec.from.IsZero() && now.Before(rec.from) ||
		!rec.until.IsZero() && !now.Before(rec.until) {
		n, until := effective(rec.in, now, grace, true)
		rec.cache, rec.until = &n, until
		rec.cacheGrace, rec.from = grace, time.Time{}
		if !rec.in.Presence.Online && rec.until.IsZero() {
			rec.from = rec.in.Presence.Since.Add(grace) // unreachable from here on
		}
	}
	return rec.cache, rec.until
}

// changed drops the cached effective node after a change to rec.in.
func (rec *record) changed() { rec.cache = nil }

// maxPastSessions bounds the ended sessions remembered per node. A late
// will comes from the connection a reconnection replaced, a few sessions
// back at most.
const maxPastSessions = 8

// NodeState summarises a node's presence for the API.
type NodeState struct {
	Name string
	// Registered reports whether the node announced a status, which makes
	// it part of the Snapshot.
	Registered bool
	Online     bool
	// Session is the agent's current connection (see schema.Presence).
	Session int64
	// LastSeen is when the last status or presence message of the node was
	// accepted; zero if none was.
	LastSeen time.Time
	// OfflineSince is when the node was last seen going offline (or first
	// learned of, offline); zero while online.
	OfflineSince time.Time
}

// New returns an empty Registry.
func New() *Registry {
	return &Registry{nodes: make(map[string]*record)}
}

// recordLocked returns the record of name, creating it (offline since now)
// if absent.
func (r *Registry) recordLocked(name string, now time.Time) *record {
	rec, ok := r.nodes[name]
	if !ok {
		rec = &record{in: NodeInput{Name: name, Presence: Presence{Since: now}}}
		r.nodes[name] = rec
	}
	return rec
}

// ApplyStatus records status as the last announcement of node status.Node
// and reports whether it differs from the previous one. The caller has
// validated the message (schema version, node name matching its topic).
//
// Each condition's Since is replaced by the controller's clock (see
// receivedSince): the device's orders nothing.
func (r *Registry) ApplyStatus(status schema.NodeStatus, now time.Time) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(status.Node, now)
	rec.lastSeen = now
	s := cloneStatus(status)
	s.Node = rec.in.Name // the same name, held once
	receivedSince(&s, rec.in.Status, now)
	if rec.in.Status != nil && reflect.DeepEqual(*rec.in.Status, s) {
		return false
	}
	rec.in.Status = &s
	rec.changed()
	return true
}

// receivedSince sets the Since of every condition of s to when the
// controller first received the condition with its current status: kept
// from prev while the status is the same, now when it is new or changed.
// A device's clock (1970 on a gateway without a real-time clock, or ahead)
// would otherwise start or postpone every tolerationSeconds of the taint
// a condition adds.
func receivedSince(s *schema.NodeStatus, prev *schema.NodeStatus, now time.Time) {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Since = now
		if prev == nil {
			continue
		}
		for _, p := range prev.Conditions {
			if p.Type == c.Type && p.Status == c.Status {
				c.Since = p.Since
			}
		}
	}
}

// ApplyPresence records a presence message of node p.Node and reports
// whether the node's online state changed.
//
// Sessions order presence messages by the order in which they arrive, not
// by their number: Session is the agent's connect time on its own clock,
// which a device without a real-time clock resets on every boot, so a
// reconnection may carry a lower number than the session it replaces. A
// session not seen before is the newest and is applied whatever it says;
// the one it replaces is remembered (see maxPastSessions), and a message
// of a remembered session is ignored (a late will of an old connection
// must not mark a reconnected node offline). One exception: a new
// session whose first message is its will (it never announced itself)
// marks the node offline but leaves the online session it replaced
// pending (record.displaced), not over: an online of that session brings
// it back, its will is ignored. Within one session offline is final: the
// will ends the session, and an online of that session arriving after it
// is stale. Since moves to now only when Online changes (or on the first
// presence of a node).
func (r *Registry) ApplyPresence(p schema.Presence, now time.Time) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(p.Node, now)
	cur := rec.in.Presence
	if cur.Known && !rec.orderLocked(p, cur) {
		return false
	}
	rec.lastSeen = now
	changed = !cur.Known || cur.Online != p.Online
	next := Presence{Known: true, Online: p.Online, Session: p.Session, Since: cur.Since}
	if changed {
		next.Since = now
	}
	rec.in.Presence = next
	rec.changed()
	return changed
}

// orderLocked decides whether p, arriving while cur is the node's
// presence, is applied, and retires the sessions it ends (see
// ApplyPresence).
func (rec *record) orderLocked(p schema.Presence, cur Presence) bool {
	switch {
	case p.Session == cur.Session:
		return cur.Online
	case rec.displaced != 0 && p.Session == rec.displaced:
		rec.displaced = 0
		if !p.Online {
			rec.retire(p.Session) // its will: the node is offline already
			return false
		}
		rec.retire(cur.Session) // the unannounced will was the late one
		return true
	case slices.Contains(rec.pastSessions, p.Session):
		return false
	case !p.Online && rec.displaced != 0:
		rec.retire(cur.Session) // another unannounced will
		return true
	case !p.Online && cur.Online:
		rec.displaced = cur.Session
		return true
	}
	rec.retire(cur.Session)
	if rec.displaced != 0 {
		rec.retire(rec.displaced)
		rec.displaced = 0
	}
	return true
}

// retire remembers session as over, keeping the newest maxPastSessions.
func (rec *record) retire(session int64) {
	rec.pastSessions = append(rec.pastSessions, session)
	if n := len(rec.pastSessions); n > maxPastSessions {
		rec.pastSessions = slices.Delete(rec.pastSessions, 0, n-maxPastSessions)
	}
}

// SetOverrides replaces the overrides of node, creating the node (offline
// since now, not registered until it announces a status) if it is unknown,
// so an operator can label a device before it first connects.
func (r *Registry) SetOverrides(node string, o Overrides, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(node, now)
	rec.in.Overrides = cloneOverrides(o)
	rec.changed()
}

// Put replaces everything known of node in.Name with in, for instance when
// restoring the registry from the store at start-up. lastSeen is the
// NodeState.LastSeen to report.
func (r *Registry) Put(in NodeInput, lastSeen time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[in.Name] = &record{in: cloneInput(in), lastSeen: lastSeen}
}

// Input returns a copy of what is known of node.
func (r *Registry) Input(node string) (NodeInput, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.nodes[node]
	if !ok {
		return NodeInput{}, false
	}
	return cloneInput(rec.in), true
}

// Delete forgets node and reports whether it was known.
func (r *Registry) Delete(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.nodes[node]
	delete(r.nodes, node)
	return ok
}

// Snapshot returns the effective model (see Effective) of every registered
// node, sorted by name, and the earliest time at which one of them will
// change by itself (zero if none will): the caller plans again then.
//
// The models are cached between calls while their input does not change,
// so the nodes returned share their maps and slices with the Registry and
// with earlier snapshots: they are read-only.
func (r *Registry) Snapshot(now time.Time, grace time.Duration) ([]schema.Node, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nodes := make([]schema.Node, 0, len(r.nodes))
	var next time.Time
	for _, rec := range r.nodes {
		if rec.in.Status == nil {
			continue
		}
		n, at := rec.effective(now, grace)
		nodes = append(nodes, *n)
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	slices.SortFunc(nodes, func(a, b schema.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, next
}

// Each calls fn with the effective model (read-only, as Snapshot's) and
// the presence of every registered node, in no order, with the registry
// locked: fn must be quick and must not call the Registry. It costs no
// copy of the fleet, for counts taken often (the metrics).
func (r *Registry) Each(now time.Time, grace time.Duration, fn func(n *schema.Node, st NodeState)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.nodes {
		if rec.in.Status == nil {
			continue
		}
		n, _ := rec.effective(now, grace)
		copied := *n // fn may not modify the cache, even its fields
		fn(&copied, rec.state())
	}
}

// Node returns the effective model of one registered node (see Snapshot,
// whose cache it shares: the node is read-only) and when it next changes
// by itself; ok is false for a node that is unknown or has not announced
// a status.
func (r *Registry) Node(name string, now time.Time, grace time.Duration) (node schema.Node, changeAt time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, found := r.nodes[name]
	if !found || rec.in.Status == nil {
		return schema.Node{}, time.Time{}, false
	}
	n, changeAt := rec.effective(now, grace)
	return *n, changeAt, true
}

// Model is Node without the copy: the node returned is the registry's
// cached model, shared and read-only. It is never modified: a change to
// the node's input or the clock leaving the model's validity replaces it,
// so a holder keeps the model it was given.
func (r *Registry) Model(name string, now time.Time, grace time.Duration) (node *schema.Node, changeAt time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, found := r.nodes[name]
	if !found || rec.in.Status == nil {
		return nil, time.Time{}, false
	}
	node, changeAt = rec.effective(now, grace)
	return node, changeAt, true
}

// States returns the presence summary of every known node, sorted by name.
func (r *Registry) States() []NodeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	states := make([]NodeState, 0, len(r.nodes))
	for _, rec := range r.nodes {
		states = append(states, rec.state())
	}
	slices.SortFunc(states, func(a, b NodeState) int { return strings.Compare(a.Name, b.Name) })
	return states
}

// Counts returns how many known nodes are online, and how many are known.
func (r *Registry) Counts() (online, known int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.nodes {
		if rec.state().Online {
			online++
		}
	}
	return online, len(r.nodes)
}

// State returns the presence summary of node.
func (r *Registry) State(node string) (NodeState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.nodes[node]
	if !ok {
		return NodeState{}, false
	}
	return rec.state(), true
}

func (rec *record) state() NodeState {
	p := rec.in.Presence
	s := NodeState{
		Name:       rec.in.Name,
		Registered: rec.in.Status != nil,
		Online:     p.Online,
		Session:    p.Session,
		LastSeen:   rec.lastSeen,
	}
	if !p.Online {
		s.OfflineSince = p.Since
	}
	return s
}

func cloneInput(in NodeInput) NodeInput {
	if in.Status != nil {
		s := cloneStatus(*in.Status)
		in.Status = &s
	}
	in.Overrides = cloneOverrides(in.Overrides)
	return in
}

func cloneStatus(s schema.NodeStatus) schema.NodeStatus {
	s.Labels = maps.Clone(s.Labels)
	s.Taints = cloneTaints(s.Taints)
	s.Conditions = slices.Clone(s.Conditions)
	s.Addresses = slices.Clone(s.Addresses)
	s.Capacity = maps.Clone(s.Capacity)
	return s
}

func cloneOverrides(o Overrides) Overrides {
	if o.Labels != nil {
		labels := make(map[string]*string, len(o.Labels))
		for k, v := range o.Labels {
			if v != nil {
				v = new(*v)
			}
			labels[k] = v
		}
		o.Labels = labels
	}
	o.Taints = cloneTaints(o.Taints)
	o.RemovedTaints = slices.Clone(o.RemovedTaints)
	if o.Unschedulable != nil {
		o.Unschedulable = new(*o.Unschedulable)
	}
	return o
}

func cloneTaints(taints []schema.Taint) []schema.Taint {
	if taints == nil {
		return nil
	}
	out := make([]schema.Taint, len(taints))
	for i, t := range taints {
		out[i] = copyTaint(t)
	}
	return out
}
