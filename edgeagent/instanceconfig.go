package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// nodeFacts is what the agent knows of its own node for the downward API:
// the labels, addresses and capacity it announces.
type nodeFacts struct {
	labels      map[string]string
	hostIPs     []string
	allocatable schema.ResourceList
}

// SetNodeStatus gives the agent the node's announced status: its labels
// (node.labels['k']), addresses (status.hostIP and hostIPs) and capacity
// (resourceFieldRef limits left unset). Node calls it on every
// measurement; instances created before the first call see no address.
func (a *Agent) SetNodeStatus(st schema.NodeStatus) {
	f := nodeFacts{labels: maps.Clone(st.Labels), hostIPs: HostIPsOf(st.Addresses), allocatable: maps.Clone(st.Capacity)}
	a.mu.Lock()
	a.node = f
	a.mu.Unlock()
}

func (a *Agent) nodeFacts() nodeFacts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.node
}

// waitingForConfigError: the desired state lists a config object the
// instance references that has not arrived yet. The instance is Pending,
// not in CreateContainerConfigError: the object exists.
type waitingForConfigError struct{ objects []string }

func (e *waitingForConfigError) Error() string {
	return "waiting for " + strings.Join(e.objects, ", ")
}

// buildInstance builds instance k's containers from t with the node's
// facts and the config objects of its namespace, and prepares its files
// (none with Config.Ephemeral).
func (a *Agent) buildInstance(k instanceKey, t schema.PodTemplateSpec) (InstanceSpec, error) {
	ic := a.instanceContext(k)
	cms, secrets, pending := a.configObjectsFor(ic.Namespace())
	if waiting := referencedPending(t, pending); len(waiting) > 0 {
		return InstanceSpec{}, &waitingForConfigError{objects: waiting}
	}
	ic.ConfigMaps, ic.Secrets = cms, secrets
	spec, err := BuildInstance(ic, t)
	if err != nil {
		return InstanceSpec{}, err
	}
	if len(spec.Init) != len(t.Spec.InitContainers) || len(spec.Containers) != len(t.Spec.Containers) {
		return InstanceSpec{}, fmt.Errorf("template of %s revision %s: built %d init and %d containers for %d and %d in the template",
			k.DaemonSet, k.Revision, len(spec.Init), len(spec.Containers), len(t.Spec.InitContainers), len(t.Spec.Containers))
	}
	return spec, nil
}

func (a *Agent) instanceContext(k instanceKey) InstanceContext {
	n := a.nodeFacts()
	ic := InstanceContext{
		Node: a.cfg.NodeName, NodeLabels: n.labels, HostIPs: n.hostIPs, Allocatable: n.allocatable,
		DaemonSet: k.DaemonSet, Revision: k.Revision, SeccompProfileDir: a.cfg.SeccompProfileDir,
		Policy: a.cfg.Policy, written: a.volumes, SecretsInMemory: a.cfg.SecretsAtRest == SecretsInMemory,
	}
	if !a.cfg.Ephemeral {
		ic.DataDir = a.cfg.DataDir
	}
	return ic
}

// referencedPending returns, as "configmap ns/x", the pending objects t
// references.
func referencedPending(t schema.PodTemplateSpec, pending []pendingObject) []string {
	refs := t.References()
	var out []string
	for _, p := range pending {
		if p.kind == "configmap" && slices.Contains(refs.ConfigMaps, p.name) || p.kind == "secret" && slices.Contains(refs.Secrets, p.name) {
			out = append(out, p.String())
		}
	}
	return out
}

// buildBlocked reports the status of an instance whose containers could
// not be built for a reason that passes (a missing config object, one
// still in transit, a volume the host cannot provide yet). Containers that
// run keep running, as in Kubernetes, where only creating a container
// needs its config; the next pass tries again. It reports ok false for any
// other error.
func (a *Agent) buildBlocked(ctx context.Context, inst *instance, found containerGroup, err error, now time.Time) (schema.InstanceStatus, bool) {
	var cfgErr *ConfigError
	var mntErr *mountError
	var waitErr *waitingForConfigError
	var phase, reason string
	switch {
	case errors.As(err, &cfgErr):
		phase, reason = schema.PhaseCreateContainerConfigError, "CreateContainerConfigError"
	case errors.As(err, &mntErr):
		phase, reason = schema.PhasePending, "FailedMount"
	case errors.As(err, &waitErr):
		phase = schema.PhasePending
	default:
		return schema.InstanceStatus{}, false
	}
	if found.hasMain() && mainsRunning(found) {
		// Running, with the reason a restart would not happen.
		return a.report(inst, found, "", err.Error(), now), true
	}
	if reason != "" && (inst.lastPhase != phase || inst.lastBlock != err.Error()) {
		a.event(ctx, schema.EventWarning, reason, inst.key.DaemonSet, err.Error())
	}
	inst.lastBlock = err.Error()
	return inst.status(phase, err.Error(), false, found, now), true
}

// sweepPods removes the files of instances no longer live (their
// containers are gone), unmounting their memory emptyDirs: the host side
// of removing a pod. With no data dir it does nothing.
func (a *Agent) sweepPods(live []instanceKey) {
	if a.cfg.Ephemeral {
		return
	}
	keep := make(map[string]bool, len(live))
	keepDirs := make(map[string]bool, len(live))
	for _, k := range live {
		uid := PodUID(a.cfg.NodeName, k.DaemonSet, k.Revision)
		keep[uid] = true
		keepDirs[podDir(a.cfg.DataDir, uid)] = true
	}
	a.volumes.retain(keepDirs)
	entries, err := os.ReadDir(filepath.Join(a.cfg.DataDir, "pods"))
	if err != nil {
		return
	}
	for _, e := range entries {
		if keep[e.Name()] || !e.IsDir() {
			continue
		}
		if err := removePodFiles(a.cfg.DataDir, e.Name()); err != nil {
			a.log.Warn("cannot remove the files of a removed instance; retrying at the next pass", "podUID", e.Name(), "err", err)
		}
	}
}
