// Package api is the controller's JSON-over-HTTP API: the stable view types
// that `edgesetctl -o json` prints, the server handler over a Backend, and
// the Client that edgesetctl uses.
package api

import (
	"time"

	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// Version is the path prefix of every API endpoint.
const Version = "v1"

// ApplyAction says what applying one object did.
type ApplyAction string

// Apply actions, as kubectl prints them.
const (
	ActionCreated    ApplyAction = "created"
	ActionConfigured ApplyAction = "configured"
	ActionUnchanged  ApplyAction = "unchanged"
	// ActionRolledBack: the manifest's template is a revision that an
	// automatic rollback rejected; it is not rolled out again (Message says
	// how to retry it) and the live template stays the one rolled back to.
	ActionRolledBack ApplyAction = "rolled back"
)

// ApplyResult reports the outcome of applying one object: a DaemonSet, a
// ConfigMap or a Secret (Kind). Revision is a daemonset's only.
type ApplyResult struct {
	Kind       string      `json:"kind"`
	Key        string      `json:"key"`
	Action     ApplyAction `json:"action"`
	Generation int64       `json:"generation"`
	Revision   int64       `json:"revision"`
	Warnings   []string    `json:"warnings,omitempty"`
	// Message explains an action that needs it (rolled back).
	Message string `json:"message,omitempty"`
	// NodesBefore and NodesAfter, set by a dry run only, count the nodes
	// that placement puts the daemonset on now and would after the apply,
	// over the controller's current nodes.
	NodesBefore int `json:"nodesBefore,omitempty"`
	NodesAfter  int `json:"nodesAfter,omitempty"`
}

// ApplyOptions qualify an apply.
type ApplyOptions struct {
	// DryRun says what would change without changing anything.
	DryRun bool
	// Source records who manages the applied daemonsets (see
	// DaemonSet.Source): "cli:PATH" from edgesetctl apply -f PATH; empty
	// for a hand apply. The manifests directory watcher uses "file:PATH".
	Source string
}

// Source states of a watched manifest file.
const (
	SourceApplied = "applied"
	SourceInvalid = "invalid"
	SourceRemoved = "removed"
)

// Source is one file of the controller's watched manifests directory.
type Source struct {
	Path string `json:"path"`
	// Status is applied, invalid (nothing of the file's current content
	// was applied) or removed (the file is gone; its daemonsets are kept
	// unless the controller prunes).
	Status string `json:"status"`
	// DaemonSets, ConfigMaps and Secrets list the objects
	// ("namespace/name") the file manages now.
	DaemonSets  []string   `json:"daemonSets,omitempty"`
	ConfigMaps  []string   `json:"configMaps,omitempty"`
	Secrets     []string   `json:"secrets,omitempty"`
	LastApplied *time.Time `json:"lastApplied,omitempty"`
	// Errors lists every problem of an invalid file.
	Errors []string `json:"errors,omitempty"`
}

// DaemonSet is a daemonset with its status, as the API returns it.
type DaemonSet struct {
	Namespace       string           `json:"namespace"`
	Name            string           `json:"name"`
	Generation      int64            `json:"generation"`
	CurrentRevision int64            `json:"currentRevision"`
	CurrentHash     string           `json:"currentHash"`
	CreatedAt       time.Time        `json:"createdAt"`
	UpdatedAt       time.Time        `json:"updatedAt"`
	Manifest        schema.DaemonSet `json:"manifest"`
	Status          DaemonSetStatus  `json:"status"`
	// Source says who applied the daemonset last: "file:PATH" (the
	// manifests directory), "cli:PATH" (edgesetctl apply -f PATH), or empty.
	Source string `json:"source,omitempty"`
	// Instances is filled by Get, one row per node that runs or should run
	// the daemonset.
	Instances []Instance `json:"instances,omitempty"`
}

// Key returns "namespace/name".
func (d *DaemonSet) Key() string { return d.Namespace + "/" + d.Name }

// DaemonSetStatus mirrors the Kubernetes DaemonSet status, plus edgeset's
// offline count.
type DaemonSetStatus struct {
	ObservedGeneration     int64 `json:"observedGeneration"`
	DesiredNumberScheduled int   `json:"desiredNumberScheduled"`
	CurrentNumberScheduled int   `json:"currentNumberScheduled"`
	NumberMisscheduled     int   `json:"numberMisscheduled"`
	NumberReady            int   `json:"numberReady"`
	NumberAvailable        int   `json:"numberAvailable"`
	NumberUnavailable      int   `json:"numberUnavailable"`
	UpdatedNumberScheduled int   `json:"updatedNumberScheduled"`
	NodesOffline           int   `json:"nodesOffline"`
	// Rollout is the progress towards the current revision.
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// RejectedRevision is the revision an automatic rollback abandoned,
	// while the template is the one it rolled back to; `edgesetctl rollout
	// retry` rolls it out again.
	RejectedRevision *RejectedRevision `json:"rejectedRevision,omitempty"`
}

// RejectedRevision is a revision an automatic rollback abandoned, and why.
type RejectedRevision struct {
	Hash     string    `json:"hash"`
	Revision int64     `json:"revision"`
	Reason   string    `json:"reason"`
	Time     time.Time `json:"time"`
}

// RolloutStatus is where a daemonset's rollout stands, by node.
type RolloutStatus struct {
	Strategy       string `json:"strategy"`
	Target         string `json:"target"`
	Total          int    `json:"total"`
	Updated        int    `json:"updated"`
	Updating       int    `json:"updating"`
	Waiting        int    `json:"waiting"`
	Offline        int    `json:"offline"`
	Failed         int    `json:"failed"`
	Unavailable    int    `json:"unavailable"`
	MaxUnavailable int    `json:"maxUnavailable"`
	Complete       bool   `json:"complete"`
	Paused         bool   `json:"paused"`
	PauseReason    string `json:"pauseReason,omitempty"`
	RolledBack     bool   `json:"rolledBack"`
	RolledBackFrom string `json:"rolledBackFrom,omitempty"`
	// RollbackReason says why an automatic rollback happened.
	RollbackReason string `json:"rollbackReason,omitempty"`
	CanaryWaiting  bool   `json:"canaryWaiting"`
	// WaitingForWindow counts the nodes on an older revision whose
	// maintenance windows are all closed; NextWindow is when the first
	// of their windows opens (absent when none ever does).
	WaitingForWindow int        `json:"waitingForWindow,omitempty"`
	NextWindow       *time.Time `json:"nextWindow,omitempty"`
	// WaitingForPrefetch counts the nodes on an older revision that
	// switch once their download of the target's images is done;
	// Prefetch counts the downloads (spec.rollout.prefetch only).
	WaitingForPrefetch int              `json:"waitingForPrefetch,omitempty"`
	Prefetch           *RolloutPrefetch `json:"prefetch,omitempty"`
	// HeldByLock counts the nodes on an older revision whose instance
	// holds its update lock: the rollout passes them over until it is
	// released. StaleLocks counts the nodes whose lock has been held longer
	// than spec.rollout.updateLockStaleAfterSeconds; `edgesetctl rollout
	// resume --force` overrides those (the instances say which).
	HeldByLock int `json:"heldByLock,omitempty"`
	StaleLocks int `json:"staleLocks,omitempty"`
}

// RolloutPrefetch counts a rollout's downloads under spec.rollout.prefetch:
// of the Nodes (reachable, their agents prefetch, on the target or serving
// on an older revision), Done have the target's images (or run it);
// Downloading are asked and not done; Unsupported are reachable nodes on
// an older revision whose agent does not prefetch (they switch without).
type RolloutPrefetch struct {
	Nodes       int `json:"nodes"`
	Done        int `json:"done"`
	Downloading int `json:"downloading"`
	Unsupported int `json:"unsupported,omitempty"`
}

// UpdateLock is an instance's update lock as the controller sees it.
type UpdateLock struct {
	// HeldSince is when the daemon took the lock, on the device's clock.
	HeldSince time.Time `json:"heldSince"`
	// Deferred: the agent deferred an update of the instance because of
	// the lock.
	Deferred bool `json:"deferred,omitempty"`
	// Stale: held longer than the daemonset allows; Overridden: an
	// operator overrode it, so the node is updated despite it.
	Stale      bool `json:"stale,omitempty"`
	Overridden bool `json:"overridden,omitempty"`
}

// Instance is one daemon instance on one node: desired and observed.
type Instance struct {
	Node      string     `json:"node"`
	DaemonSet string     `json:"daemonSet"`
	Revision  string     `json:"revision"`
	Phase     string     `json:"phase"`
	Ready     bool       `json:"ready"`
	Restarts  int32      `json:"restarts"`
	Message   string     `json:"message,omitempty"`
	Online    bool       `json:"online"`
	LastSeen  *time.Time `json:"lastSeen,omitempty"`
	// Prefetch is the node's download of the daemonset's next revision,
	// as its agent last reported it, while its desired state asks for one.
	Prefetch *InstancePrefetch `json:"prefetch,omitempty"`
	// UpdateLock is the update lock the node reports for the daemonset
	// (on this instance, or on the older one it keeps while it defers
	// its update); nil while none is held.
	UpdateLock *UpdateLock `json:"updateLock,omitempty"`
}

// InstancePrefetch is one node's download of a revision's images.
type InstancePrefetch struct {
	Revision   string `json:"revision"`
	BytesDone  int64  `json:"bytesDone"`
	BytesTotal int64  `json:"bytesTotal,omitempty"`
	Done       bool   `json:"done,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Node is a node's effective model (announced merged with overrides and the
// controller's lifecycle taints) with its presence.
type Node struct {
	schema.Node
	Online             bool       `json:"online"`
	LastSeen           *time.Time `json:"lastSeen,omitempty"`
	OfflineSince       *time.Time `json:"offlineSince,omitempty"`
	DesiredGeneration  uint64     `json:"desiredGeneration"`
	ObservedGeneration uint64     `json:"observedGeneration"`
	Instances          []Instance `json:"instances,omitempty"`
	// Placement explains, per daemonset, whether it should run here.
	Placement []Placement `json:"placement,omitempty"`
	// Telemetry is what the node's agent last reported of its resources,
	// with a short history (GetNode only; nil when it never reported).
	Telemetry *telemetry.Node `json:"telemetry,omitempty"`
}

// Placement is the placement decision of one daemonset for one node.
type Placement struct {
	Node        string   `json:"node"`
	DaemonSet   string   `json:"daemonset"`
	Run         bool     `json:"run"`
	KeepRunning bool     `json:"keepRunning"`
	Reasons     []string `json:"reasons,omitempty"`
}

// NodePatch changes a node's operator overrides, which win over what the
// node announces and survive its re-announcements.
type NodePatch struct {
	// Labels sets labels (non-nil value) or removes them (nil value).
	Labels map[string]*string `json:"labels,omitempty"`
	// AddTaints adds taints, replacing any with the same key and effect.
	AddTaints []schema.Taint `json:"addTaints,omitempty"`
	// RemoveTaints removes taints named "key:effect", or "key" for every
	// effect.
	RemoveTaints []string `json:"removeTaints,omitempty"`
	// Unschedulable cordons (true) or uncordons (false) the node.
	Unschedulable *bool `json:"unschedulable,omitempty"`
	// Overwrite allows Labels to change the value of a label the node
	// already has; without it such a patch is refused and changes
	// nothing (kubectl label --overwrite).
	Overwrite bool `json:"overwrite,omitempty"`
}

// Rollout actions.
const (
	RolloutPause   = "pause"
	RolloutResume  = "resume"
	RolloutRestart = "restart"
	RolloutPromote = "promote"
	RolloutUndo    = "undo"
	// RolloutRetry rolls out again the revision an automatic rollback
	// rejected.
	RolloutRetry = "retry"
)

// RolloutRequest acts on a daemonset's rollout.
type RolloutRequest struct {
	Action string `json:"action"`
	// ToRevision is undo's target revision number; zero means the
	// revision before the current one.
	ToRevision int64 `json:"toRevision,omitempty"`
}

// Revision is one revision of a daemonset's template.
type Revision struct {
	Number      int64     `json:"number"`
	Hash        string    `json:"hash"`
	ChangeCause string    `json:"changeCause,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	Current     bool      `json:"current"`
	// Nodes counts the nodes asked to run this revision now.
	Nodes int `json:"nodes"`
	// Images lists the revision's container images.
	Images []string `json:"images"`
	// Pins are the digests the revision pins its images to
	// (schema.ImagePinsAnnotation), as the controller resolved them when
	// it made the revision; none for an image it could not resolve.
	Pins []schema.ImagePin `json:"pins,omitempty"`
}

// Event is a stored controller event.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
	// Count is how many occurrences the event stands for (Kubernetes'
	// count): a repeat within the series window folds into the stored
	// event. Omitted for one occurrence.
	Count int32 `json:"count,omitempty"`
	// LastTime is the last occurrence (Kubernetes' lastTimestamp; Time is
	// the first), set when Count is.
	LastTime *time.Time `json:"lastTime,omitempty"`
	// Source is the node whose report caused the event; empty for the
	// controller's own.
	Source string `json:"source,omitempty"`
}

// EventFilter selects events.
type EventFilter struct {
	Object   string // "daemonset/ns/name" or "node/name"; empty for all
	SinceSeq uint64 // only events after this sequence number
	Limit    int    // newest Limit events; 0 for the server default
}

// VersionInfo describes the controller.
type VersionInfo struct {
	Version string `json:"version"`
	Broker  string `json:"broker"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Message string `json:"error"`
	// Fields lists validation problems, one per field path.
	Fields []schema.FieldError `json:"fields,omitempty"`
}
