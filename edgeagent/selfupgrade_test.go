package edgeagent_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// fakeSelf is a SelfUpgrader that records what the agent tells it.
type fakeSelf struct {
	mu        sync.Mutex
	syncs     []string // revisions SyncSelf was called with
	connected int
	status    edgeagent.SelfStatus
}

var _ edgeagent.SelfUpgrader = (*fakeSelf)(nil)

func (f *fakeSelf) SyncSelf(revision string, _ schema.PodTemplateSpec, _ func()) edgeagent.SelfStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs = append(f.syncs, revision)
	return f.status
}

func (f *fakeSelf) Connected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected++
}

func (f *fakeSelf) last() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.syncs) == 0 {
		return "", f.connected
	}
	return f.syncs[len(f.syncs)-1], f.connected
}

func agentRevision(ann map[string]string, containers ...schema.Container) schema.Revision {
	t := schema.PodTemplateSpec{Metadata: schema.ObjectMeta{Annotations: ann}, Spec: schema.PodSpec{Containers: containers}}
	return testRevision(schema.AgentDaemonSet, t)
}

var (
	agentBaseline = agentRevision(nil, schema.Container{Name: schema.AgentBaselineContainer, Image: schema.AgentBaselineImage})
	agentV2       = agentRevision(map[string]string{
		schema.AnnotationAgentVersion:                      "v2",
		schema.AnnotationAgentDigestPrefix + "linux-amd64": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	}, schema.Container{Name: "linux-amd64", Image: "edgeset.io/edgeset-agent:v2-linux-amd64-aaaaaaaaaaaa"})
)

// TestSelfInstanceIsTheUpgrader: the agent's own instance never becomes a
// container; its status is the SelfUpgrader's, which hears of every
// desired state, and of the instance going away.
func TestSelfInstanceIsTheUpgrader(t *testing.T) {
	h := newHarness(t)
	self := &fakeSelf{status: edgeagent.SelfStatus{Phase: schema.PhasePulling, Message: "downloading agent v2"}}
	cfg := h.config()
	cfg.SelfUpgrade = self
	h.start(cfg)
	h.connect()
	h.apply(1, agentV2, revA)
	st := h.waitInstance(schema.AgentDaemonSet, agentV2.Hash, phaseIs(schema.PhasePulling))
	assert.Equal(t, "downloading agent v2", st.Message)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	for _, c := range h.managed() {
		assert.NotEqual(t, schema.AgentDaemonSet, c.Labels[edgeagent.LabelDaemonSet], "no container for the agent itself")
	}
	rev, connected := self.last()
	assert.Equal(t, agentV2.Hash, rev)
	assert.Equal(t, 1, connected, "one desired state, one Connected")

	self.mu.Lock()
	self.status = edgeagent.SelfStatus{Phase: schema.PhaseRunning, Ready: true, Message: "agent v2"}
	self.mu.Unlock()
	h.waitInstance(schema.AgentDaemonSet, agentV2.Hash, runningReady)

	h.sendDesired(1, want(agentV2), want(revA)) // republished: same generation
	h.waitPasses(2)
	_, connected = self.last()
	assert.Equal(t, 2, connected, "a republished desired state confirms too")

	h.apply(2, revA)
	h.waitPasses(3)
	rev, _ = self.last()
	assert.Equal(t, "", rev, "the instance went away: the upgrader is told there is nothing to do")
}

// TestSelfInstanceWithoutUpgrader: an agent that cannot upgrade itself
// (a simulator) runs the baseline and refuses an upgrade.
func TestSelfInstanceWithoutUpgrader(t *testing.T) {
	h := runWith(t, agentBaseline)
	st := h.waitInstance(schema.AgentDaemonSet, agentBaseline.Hash, runningReady)
	assert.Contains(t, st.Message, "the baseline revision keeps the installed agent")
	h.apply(2, agentV2)
	st = h.waitInstance(schema.AgentDaemonSet, agentV2.Hash, phaseIs(schema.PhaseRefused))
	assert.Contains(t, st.Message, "this agent does not upgrade itself")
	require.Empty(t, h.managed())
}
