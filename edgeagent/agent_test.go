package edgeagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

var (
	revA  = testRevision("edge/logs", testTemplate("busybox:1.36"))
	revA2 = testRevision("edge/logs", testTemplate("busybox:1.37"))
	revB  = testRevision("edge/metrics", testTemplate("nginx:1.27"))
)

// runWith starts an agent, connects it and sends a desired state with the
// given revisions.
func runWith(t *testing.T, revs ...schema.Revision) *harness {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.apply(1, revs...)
	return h
}

func (h *harness) apply(gen uint64, revs ...schema.Revision) {
	var ins []schema.DesiredInstance
	for _, r := range revs {
		ins = append(ins, want(r))
	}
	h.sendDesired(gen, ins...)
	for _, r := range revs {
		h.sendRevision(r)
	}
}

func TestDesiredStateCreatesOneInstancePerDaemonSet(t *testing.T) {
	h := runWith(t, revA, revB)
	a := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	b := h.waitInstance(revB.DaemonSet, revB.Hash, runningReady)
	h.waitPasses(5)

	list := h.managed()
	require.Len(t, list, 2)
	assert.Equal(t, 2, h.rt.Stats().Creates, "no container created twice")
	assert.ElementsMatch(t, []string{a.ContainerIDs[0], b.ContainerIDs[0]}, []string{list[0].ID, list[1].ID})
	obs, _ := h.agent.Observed()
	assert.Equal(t, uint64(1), obs.ObservedGeneration)
	assert.False(t, h.conn.subscribed(schema.RevisionTopic(revA.Hash)), "unsubscribed once cached")
	assert.True(t, h.conn.subscribed(schema.NodeTopic(testNode, schema.TopicDesired)))
}

func TestOlderOrEqualGenerationIgnored(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.apply(5, revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)

	h.apply(5, revB)
	h.apply(4, revB)
	h.waitPasses(3)
	_, found := h.instance(revB.DaemonSet, revB.Hash)
	assert.False(t, found, "stale generations must not be applied")
	obs, _ := h.agent.Observed()
	assert.Equal(t, uint64(5), obs.ObservedGeneration)

	h.apply(6, revB)
	h.waitInstance(revB.DaemonSet, revB.Hash, runningReady)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if _, found := h.instance(revA.DaemonSet, revA.Hash); found || len(h.managed()) != 1 {
			return errors.New("instance of generation 5 still present")
		}
		return nil
	})
}

func TestDesiredStateForAnotherNodeIgnored(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.sendDesiredFor("gw-2", 1, want(revA))
	h.sendRevision(revA)
	h.waitPasses(3)
	obs, ok := h.agent.Observed()
	require.True(t, ok)
	assert.Empty(t, obs.Instances)
	assert.Zero(t, obs.ObservedGeneration)
	assert.Empty(t, h.managed())
}

func TestRevisionWithWrongHashRejected(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.sendDesired(1, want(revA))
	forged := revA
	forged.Template = testTemplate("evil:latest")
	h.sendRevision(forged)
	h.waitPasses(3)

	st := h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhasePending))
	assert.Equal(t, "waiting for revision "+revA.Hash, st.Message)
	assert.Empty(t, h.managed())
	assert.True(t, h.conn.subscribed(schema.RevisionTopic(revA.Hash)), "still waiting for the real revision")

	h.sendRevision(revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
}

// TestMissingRevisionResubscribed: a revision whose retained message never
// came (a broker cluster still spreading it when the agent subscribed) is
// subscribed to again 5 s after it went missing, then after 10 s, 20 s...,
// so its retained message is sent again; once it arrives, no more.
func TestMissingRevisionResubscribed(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.sendDesired(1, want(revA))
	topic := schema.RevisionTopic(revA.Hash)
	h.waitPasses(3)
	require.Equal(t, 1, h.conn.subscriptions(topic), "subscribed once when it went missing")
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{4 * time.Second, 1}, {time.Second, 2}, {9 * time.Second, 2}, {time.Second, 3}, {20 * time.Second, 4}} {
		h.clock.Advance(step.advance)
		h.waitPasses(3)
		require.Equal(t, step.want, h.conn.subscriptions(topic), "after %s more", step.advance)
	}
	h.sendRevision(revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.clock.Advance(5 * time.Minute)
	h.waitPasses(3)
	assert.Equal(t, 4, h.conn.subscriptions(topic), "no re-subscription once it arrived")
}

// TestRevisionSharedWithAnotherDaemonSetAccepted: revisions are
// content-addressed; one published under another daemonset with an
// identical template serves every daemonset that references its hash.
func TestRevisionSharedWithAnotherDaemonSetAccepted(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.sendDesired(1, want(revA))
	other := revA
	other.DaemonSet, other.Number = "edge/other", 7
	h.sendRevision(other)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	require.Len(t, h.managed(), 1)
	assert.Equal(t, revA.DaemonSet, h.managed()[0].Labels[edgeagent.LabelDaemonSet], "the container belongs to the desired instance's daemonset")
}

func TestOfflineStartFromPersistedState(t *testing.T) {
	h := runWith(t, revA, revB)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.waitInstance(revB.DaemonSet, revB.Hash, runningReady)
	h.stop()

	// The device reboots with the site offline: an empty engine (the images
	// are still on disk) and a broker connection that never comes up.
	rebooted := fake.New()
	rebooted.AddImage("busybox:1.36", "nginx:1.27")
	h.rt = &countingRuntime{Runtime: rebooted}
	h.conn = newFakeConn()
	h.conn.Err = errors.New("network unreachable")
	h.start(h.config())

	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.waitInstance(revB.DaemonSet, revB.Hash, runningReady)
	assert.Len(t, h.managed(), 2)
	assert.Zero(t, h.conn.callCount(), "no broker activity before OnConnect")
	obs, _ := h.agent.Observed()
	assert.Equal(t, uint64(1), obs.ObservedGeneration)
}

func TestAdoptionAfterRestart(t *testing.T) {
	h := runWith(t, revA, revB)
	before := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.waitInstance(revB.DaemonSet, revB.Hash, runningReady)
	h.stop()
	creates := h.rt.Stats().Creates

	h.start(h.config())
	after := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.waitInstance(revB.DaemonSet, revB.Hash, runningReady)
	h.waitPasses(3)
	assert.Equal(t, creates, h.rt.Stats().Creates, "adopted, not recreated")
	assert.Equal(t, before.ContainerIDs, after.ContainerIDs)
}

func TestRebootedEngineStartsExitedContainersPromptly(t *testing.T) {
	h := runWith(t, revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.stop()
	h.rt.KillAll()

	h.start(h.config())
	st := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	assert.Zero(t, st.Restarts, "an engine reboot is not a crash of the daemon")
}

func TestUpdateReplacesInstanceOnlyOnceNewTemplateArrives(t *testing.T) {
	h := runWith(t, revA)
	old := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)

	h.sendDesired(2, want(revA2))
	h.waitPasses(3)
	st := h.waitInstance(revA2.DaemonSet, revA2.Hash, phaseIs(schema.PhasePending))
	assert.Equal(t, "waiting for revision "+revA2.Hash, st.Message)
	kept, found := h.instance(revA.DaemonSet, revA.Hash)
	require.True(t, found, "old instance reported while kept")
	assert.Equal(t, old.ContainerIDs, kept.ContainerIDs, "old instance untouched while the template is missing")
	require.Len(t, h.managed(), 1)

	h.sendRevision(revA2)
	h.waitInstance(revA2.DaemonSet, revA2.Hash, runningReady)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		list := h.managed()
		if len(list) != 1 || list[0].Labels[edgeagent.LabelRevision] != revA2.Hash {
			return fmt.Errorf("%d containers, want only the new revision", len(list))
		}
		if _, found := h.instance(revA.DaemonSet, revA.Hash); found {
			return errors.New("old instance still reported")
		}
		return nil
	})
}

func TestSurgePairRunsBothUntilOldDropped(t *testing.T) {
	h := runWith(t, revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)

	h.apply(2, revA, revA2)
	h.waitInstance(revA2.DaemonSet, revA2.Hash, runningReady)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	assert.Len(t, h.managed(), 2)

	h.sendDesired(3, want(revA2))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if list := h.managed(); len(list) != 1 || list[0].Labels[edgeagent.LabelRevision] != revA2.Hash {
			return fmt.Errorf("%d containers, want the new revision only", len(list))
		}
		return nil
	})
}

func TestLeftoversAndDuplicatesRemovedForeignUntouched(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	specs, err := edgeagent.BuildSpecs(testNode, revA.DaemonSet, revA.Hash, revA.Template)
	require.NoError(t, err)
	original := createStarted(t, h.rt.Runtime, specs[0])
	dup := specs[0]
	dup.Name += "-dup"
	duplicate := createStarted(t, h.rt.Runtime, dup)
	leftover := specs[0]
	leftover.Name = "leftover"
	leftover.Labels = cloneLabels(specs[0].Labels)
	leftover.Labels[edgeagent.LabelDaemonSet] = "edge/removed"
	createStarted(t, h.rt.Runtime, leftover)
	foreign := createStarted(t, h.rt.Runtime, edgeagent.ContainerSpec{Name: "postgres", Image: "nginx:1.27", Labels: map[string]string{"app": "db"}})
	otherNode := specs[0]
	otherNode.Name = "other-node"
	otherNode.Labels = cloneLabels(specs[0].Labels)
	otherNode.Labels[edgeagent.LabelNode] = "gw-2"
	foreignManaged := createStarted(t, h.rt.Runtime, otherNode)

	h.start(h.config())
	h.connect()
	h.apply(1, revA)
	st := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	assert.Equal(t, []string{original}, st.ContainerIDs, "the oldest running duplicate is kept")
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := len(h.managed()); n != 1 {
			return fmt.Errorf("%d managed containers, want 1", n)
		}
		return nil
	})
	_, err = h.rt.Inspect(ctx, duplicate)
	assert.ErrorIs(t, err, edgeagent.ErrNotFound)
	for _, id := range []string{foreign, foreignManaged} {
		c, err := h.rt.Inspect(ctx, id)
		require.NoError(t, err, "container of someone else removed")
		assert.True(t, c.Running)
	}
}

func TestNothingRemovedBeforeFirstDesiredState(t *testing.T) {
	h := newHarness(t)
	specs, err := edgeagent.BuildSpecs(testNode, revA.DaemonSet, revA.Hash, revA.Template)
	require.NoError(t, err)
	id := createStarted(t, h.rt.Runtime, specs[0])
	h.start(h.config()) // empty data dir: no desired state known
	st := h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseRunning))
	h.waitPasses(3)
	assert.Equal(t, []string{id}, st.ContainerIDs)
	assert.Len(t, h.managed(), 1)
}

func createStarted(t *testing.T, rt *fake.Runtime, spec edgeagent.ContainerSpec) string {
	t.Helper()
	id, err := rt.Create(context.Background(), spec)
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background(), id))
	return id
}

func cloneLabels(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestCrashLoopBackOff(t *testing.T) {
	h := runWith(t, revA)
	st := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	id := st.ContainerIDs[0]

	require.NoError(t, h.rt.Crash(id, 3))
	st = h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 1, st.Restarts)
	require.NotNil(t, st.LastExitCode)
	assert.EqualValues(t, 3, *st.LastExitCode)
	assert.Contains(t, st.Message, "back-off 10s")
	h.waitPasses(3)
	c, err := h.rt.Inspect(context.Background(), id)
	require.NoError(t, err)
	assert.False(t, c.Running, "not restarted before the backoff expires")

	h.clock.Advance(10 * time.Second)
	st = h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	assert.Equal(t, []string{id}, st.ContainerIDs, "restarted in place")
	assert.EqualValues(t, 1, st.Restarts)

	require.NoError(t, h.rt.Crash(id, 3))
	st = h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 2, st.Restarts)
	assert.Contains(t, st.Message, "back-off 20s")
	assertEvent(t, h, "Crashed")
}

func assertEvent(t *testing.T, h *harness, reason string) schema.NodeEvent {
	t.Helper()
	var ev schema.NodeEvent
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicEvents)) {
			require.NoError(t, json.Unmarshal(p.payload, &ev))
			if ev.Reason == reason {
				assert.False(t, p.retained, "events are not retained")
				return nil
			}
		}
		return fmt.Errorf("no %s event", reason)
	})
	return ev
}

func TestReadinessGating(t *testing.T) {
	var healthy atomic.Bool
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].ReadinessProbe = &schema.Probe{
			Exec: &schema.ExecAction{Command: []string{"check"}}, PeriodSeconds: 1, TimeoutSeconds: 100,
		}
	})
	rev := testRevision("edge/gated", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		if healthy.Load() {
			return 0, nil, nil
		}
		return 1, []byte("not yet"), nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseRunning))
	h.waitPasses(5)
	st, _ = h.instance(rev.DaemonSet, rev.Hash)
	assert.False(t, st.Ready, "not ready while the readiness probe fails")
	assert.Nil(t, st.ReadySince)

	healthy.Store(true)
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	require.NotNil(t, st.ReadySince)
	assert.Equal(t, h.clock.Now(), *st.ReadySince)
}

func TestLivenessFailureRestarts(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].LivenessProbe = &schema.Probe{
			Exec: &schema.ExecAction{Command: []string{"alive"}}, PeriodSeconds: 1, TimeoutSeconds: 100, FailureThreshold: 2,
		}
	})
	rev := testRevision("edge/live", tmpl)
	h := newHarness(t)
	h.rt.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		if failing.Load() {
			return 1, []byte("deadlock"), nil
		}
		return 0, nil, nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.EqualValues(t, 1, st.Restarts)
	ev := assertEvent(t, h, "Unhealthy")
	assert.Contains(t, ev.Message, "liveness probe failed")

	failing.Store(false)
	h.clock.Advance(10 * time.Second)
	st = h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	assert.EqualValues(t, 1, st.Restarts)
}

func TestImagePullFailure(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	rev := testRevision("edge/new", testTemplate("registry.local/agent:2"))
	h := newHarness(t)
	h.rt.ImagePullFailure = func(image string) error {
		if broken.Load() {
			return errors.New("manifest unknown")
		}
		return nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseImagePullBackOff))
	assert.Contains(t, st.Message, "manifest unknown")
	var first schema.InstanceStatus
	for _, st := range h.publishedStatuses(rev.DaemonSet, rev.Hash) {
		if st.Phase != schema.PhasePending {
			first = st
			break
		}
	}
	assert.Equal(t, schema.PhaseErrImagePull, first.Phase, "the failed attempt itself is ErrImagePull")
	assert.Contains(t, first.Message, "manifest unknown")
	assertEvent(t, h, "ErrImagePull")
	assert.Empty(t, h.managed())

	broken.Store(false)
	h.clock.Advance(10 * time.Second)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
}

func TestPolicyRefusal(t *testing.T) {
	privileged := true
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.Containers[0].SecurityContext = &schema.SecurityContext{Privileged: &privileged}
	})
	rev := testRevision("edge/root", tmpl)
	h := newHarness(t)
	cfg := h.config()
	cfg.Policy = edgeagent.LocalPolicy{RefusePrivileged: true}
	h.start(cfg)
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseRefused))
	assert.Contains(t, st.Message, "privileged")
	h.waitPasses(3)
	assert.Zero(t, h.rt.Stats().Creates, "a refused instance is never created")
	assertEvent(t, h, "Refused")
}

func TestObservedPublishedOnlyOnChange(t *testing.T) {
	h := runWith(t, revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	topic := schema.NodeTopic(testNode, schema.TopicObserved)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		pubs := h.conn.published(topic)
		if len(pubs) == 0 {
			return errors.New("no observed state published yet")
		}
		var last schema.ObservedState
		require.NoError(t, json.Unmarshal(pubs[len(pubs)-1].payload, &last))
		if len(last.Instances) != 1 || !last.Instances[0].Ready {
			return errors.New("ready state not published yet")
		}
		return nil
	})
	before := len(h.conn.published(topic))
	h.waitPasses(10)
	assert.Len(t, h.conn.published(topic), before, "no republish without a change")
	for _, p := range h.conn.published(topic) {
		assert.True(t, p.retained)
	}

	st, _ := h.instance(revA.DaemonSet, revA.Hash)
	require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 1))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if len(h.conn.published(topic)) <= before {
			return errors.New("change not published")
		}
		return nil
	})
}

func TestOnConnectRepublishesAndResubscribes(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.apply(1, revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	h.sendDesired(2, want(revA), want(revB)) // revB does not arrive yet
	h.waitInstance(revB.DaemonSet, revB.Hash, phaseIs(schema.PhasePending))

	// Connection lost: events are dropped and counted, nothing is sent.
	h.agent.OnConnectionLost()
	h.conn.newSession(errors.New("offline"))
	dropped := h.agent.DroppedEvents()
	st, _ := h.instance(revA.DaemonSet, revA.Hash)
	require.NoError(t, h.rt.Crash(st.ContainerIDs[0], 1))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.agent.DroppedEvents() == dropped {
			return errors.New("crash event not counted as dropped")
		}
		return nil
	})
	assert.Zero(t, h.conn.callCount(), "nothing sent while disconnected")

	// Reconnected with a fresh session: subscriptions and state are back.
	h.conn.newSession(nil)
	h.connect()
	assert.True(t, h.conn.subscribed(schema.NodeTopic(testNode, schema.TopicDesired)))
	assert.True(t, h.conn.subscribed(schema.RevisionTopic(revB.Hash)), "missing revision resubscribed")
	assert.False(t, h.conn.subscribed(schema.RevisionTopic(revA.Hash)), "cached revision not resubscribed")
	pubs := h.conn.published(schema.NodeTopic(testNode, schema.TopicObserved))
	require.NotEmpty(t, pubs, "observed state republished on connect")
	var got schema.ObservedState
	require.NoError(t, json.Unmarshal(pubs[0].payload, &got))
	assert.Equal(t, uint64(2), got.ObservedGeneration)
	assert.True(t, pubs[0].retained)
}

func TestRunTwiceFails(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.waitPasses(1) // the first Run is under way
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.agent.Run(ctx)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "twice"))
}

// TestRunAsRootIsACreateContainerConfigError: an image that would run as
// root under runAsNonRoot is the kubelet's CreateContainerConfigError,
// with the runtime's reason once (not "create container X: create
// container X: ..."), an event, and a retry at later passes.
func TestRunAsRootIsACreateContainerConfigError(t *testing.T) {
	h := newHarness(t)
	var refuse atomic.Bool
	refuse.Store(true)
	h.rt.CreateFailure = func(edgeagent.ContainerSpec) error {
		if refuse.Load() {
			return edgeagent.ErrRunAsRoot
		}
		return nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, revA)
	st := h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCreateContainerConfigError))
	assert.Regexp(t, `^create [^:]+: container has runAsNonRoot and image will run as root$`, st.Message)
	ev := assertEvent(t, h, "CreateContainerConfigError")
	assert.Equal(t, st.Message, ev.Message)

	refuse.Store(false) // the image now runs as a user: the next pass starts it
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
}

// TestStartErrorBacksOff: a start the engine refuses (an OCI runtime that
// may not grant the capabilities) is the kubelet's StartError: counted as
// a restart, with an event, and retried under the crash back-off, not at
// every pass.
func TestStartErrorBacksOff(t *testing.T) {
	h := newHarness(t)
	var refuse atomic.Bool
	refuse.Store(true)
	var attempts atomic.Int64
	h.rt.StartFailure = func(edgeagent.ContainerSpec) error {
		attempts.Add(1)
		if refuse.Load() {
			return errors.New("failed to create shim task: OCI runtime create failed: unable to apply caps: operation not permitted")
		}
		return nil
	}
	h.start(h.config())
	h.connect()
	h.apply(1, revA)
	st := h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff))
	assert.Contains(t, st.Message, "StartError: start container ")
	assert.Contains(t, st.Message, "unable to apply caps: operation not permitted; back-off 10s restarting failed container main")
	assert.Equal(t, int32(1), st.Restarts)
	require.NotNil(t, st.LastExitCode)
	assert.Equal(t, int32(128), *st.LastExitCode)
	assertEvent(t, h, "StartError")

	h.waitPasses(10)
	assert.Equal(t, int64(1), attempts.Load(), "no new attempt before the back-off ends")
	h.clock.Advance(10 * time.Second)
	h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseCrashLoopBackOff)) // second failure: back-off 20s
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if st, _ := h.instance(revA.DaemonSet, revA.Hash); !strings.Contains(st.Message, "back-off 20s") {
			return fmt.Errorf("message %q, want back-off 20s", st.Message)
		}
		return nil
	})
	assert.Equal(t, int64(2), attempts.Load())

	refuse.Store(false)
	h.clock.Advance(20 * time.Second)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
}

// TestRepublishedDesiredStateReportedAgain: the desired state the agent
// already runs, received again (the controller republishes every desired
// state when it connects), is answered with the observed state, unchanged
// as it is: a broker cluster may have lost the retained report the
// agent published last, and the agent publishes only on change otherwise.
func TestRepublishedDesiredStateReportedAgain(t *testing.T) {
	h := runWith(t, revA)
	h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	topic := schema.NodeTopic(testNode, schema.TopicObserved)
	var last []byte
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		pubs := h.conn.published(topic)
		if len(pubs) == 0 {
			return errors.New("nothing published")
		}
		var obs schema.ObservedState
		last = pubs[len(pubs)-1].payload
		require.NoError(t, json.Unmarshal(last, &obs))
		if len(obs.Instances) != 1 || runningReady(obs.Instances[0]) != nil {
			return fmt.Errorf("last report %s, want the instance running and ready", last)
		}
		return nil
	})
	h.waitPasses(3)
	before := len(h.conn.published(topic))

	h.apply(1, revA)
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		pubs := h.conn.published(topic)
		if len(pubs) == before {
			return errors.New("republished desired state not answered")
		}
		if !bytes.Equal(pubs[before].payload, last) {
			return fmt.Errorf("answered %s, want the unchanged report %s", pubs[before].payload, last)
		}
		return nil
	})
}
