package edgeagent

import (
	"context"

	"github.com/edgeset/edgeset/schema"
)

// SelfUpgrader replaces the agent's own binary when the node is to run a
// revision of the reserved daemonset schema.AgentDaemonSet, whose
// instance is the agent itself rather than a container
// (edgeagent/selfupdate implements it). Without one (Config.SelfUpgrade
// nil) that instance is Refused.
type SelfUpgrader interface {
	// SyncSelf is called on every pass with the revision of the agent's
	// daemonset the desired state names (its hash and template), and
	// returns the instance's status; revision is "" when the desired
	// state names none or its template has not arrived (nothing to do;
	// the status is ignored). It must not block: the work happens
	// elsewhere, which calls poke (asking for another pass) when the
	// status changes.
	SyncSelf(revision string, template schema.PodTemplateSpec, poke func()) SelfStatus
	// Connected is called on the agent's loop each time a desired state
	// for this node arrives from the broker: the agent is connected and
	// told what to run.
	Connected()
}

// SelfStatus is the status of the agent's own instance.
type SelfStatus struct {
	Phase   string
	Message string
	Ready   bool
}

// syncSelf reports the agent's own instance k: the SelfUpgrader's status,
// with a Warning event when it starts failing. It never touches the
// container runtime.
func (a *Agent) syncSelf(ctx context.Context, p *pass, k instanceKey) schema.InstanceStatus {
	inst := a.tracker(k)
	rev, ok := a.revisions[k.Revision]
	var st SelfStatus
	switch {
	case !ok:
		a.idleSelf()
		st = SelfStatus{Phase: schema.PhasePending, Message: "waiting for revision " + k.Revision}
	case a.cfg.SelfUpgrade == nil:
		st = withoutSelfUpgrade(rev.Template)
	default:
		st = a.cfg.SelfUpgrade.SyncSelf(k.Revision, rev.Template, a.poke)
	}
	if (st.Phase == schema.PhaseFailed || st.Phase == schema.PhaseRefused) && inst.lastPhase != st.Phase {
		a.event(ctx, schema.EventWarning, "AgentUpgradeFailed", k.DaemonSet, st.Message)
	}
	return inst.status(st.Phase, st.Message, st.Ready, containerGroup{}, p.now)
}

// selfConnected tells the SelfUpgrader a desired state arrived.
func (a *Agent) selfConnected() {
	if a.cfg.SelfUpgrade != nil {
		a.cfg.SelfUpgrade.Connected()
	}
}

// idleSelf tells the SelfUpgrader the node is to run no revision of the
// agent's daemonset that it holds.
func (a *Agent) idleSelf() {
	if a.cfg.SelfUpgrade != nil {
		a.cfg.SelfUpgrade.SyncSelf("", schema.PodTemplateSpec{}, a.poke)
	}
}

// withoutSelfUpgrade is the status of the agent's own instance on an
// agent that cannot upgrade itself (a simulator, a test, a binary whose
// path is unknown): the baseline revision is what it runs; any other is
// Refused.
func withoutSelfUpgrade(t schema.PodTemplateSpec) SelfStatus {
	if up, err := schema.ParseAgentUpgrade(t); err == nil && up.Baseline() {
		return SelfStatus{Phase: schema.PhaseRunning, Ready: true, Message: "agent " + schema.Version + " (the baseline revision keeps the installed agent)"}
	}
	return SelfStatus{Phase: schema.PhaseRefused, Message: "this agent does not upgrade itself (it runs without a binary of its own, as a simulator or a test)"}
}
