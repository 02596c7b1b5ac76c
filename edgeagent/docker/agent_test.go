package docker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// The agent tests drive edgeagent.Agent over the real Docker runtime: the
// test plays the controller through HandleMessage and checks the engine
// through its own client.

// Environment of the test binary re-executed as a standalone agent process
// (see TestMain and startAgentProcess).
const (
	envAgentNode = "EDGESET_TEST_AGENT_NODE"
	envAgentDir  = "EDGESET_TEST_AGENT_DIR"
)

func TestMain(m *testing.M) {
	if node := os.Getenv(envAgentNode); node != "" {
		os.Exit(runAgentProcess(node, os.Getenv(envAgentDir)))
	}
	os.Exit(m.Run())
}

// runAgentProcess runs an offline agent of node on dir until SIGTERM: the
// device side of TestAgentSIGKILLMidCreate.
func runAgentProcess(node, dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rt, err := docker.New(ctx, docker.Options{})
	if err != nil {
		log.Error("connect to engine", "err", err)
		return 1
	}
	defer rt.Close()
	a, err := edgeagent.New(agentConfig(node, dir, log), rt, newRecordingConn(errors.New("offline")))
	if err != nil {
		log.Error("new agent", "err", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("run agent", "err", err)
		return 1
	}
	return 0
}

func TestAgentCreatesOneLabelledContainer(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	rev := revision("edge/logs", 1, appTemplate(h.e.image, []string{"sleep"}))
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev, runningReady)
	list := h.waitManaged(onlyRevisions(rev))
	c := list[0]
	assert.Equal(t, []string{c.ID}, st.ContainerIDs)
	wantLabels := map[string]string{
		edgeagent.LabelManaged:   "true",
		edgeagent.LabelNode:      h.e.node,
		edgeagent.LabelDaemonSet: rev.DaemonSet,
		edgeagent.LabelRevision:  rev.Hash,
		edgeagent.LabelContainer: "main",
		edgeagent.LabelIndex:     "0",
	}
	for k, v := range wantLabels {
		assert.Equal(t, v, c.Labels[k], "label %s", k)
	}
	assert.Equal(t, []string{"/" + edgeagent.ContainerName(h.e.node, rev.DaemonSet, rev.Hash, "main")}, c.Names)
	in := inspectOrNil(t, h.e.cli, c.ID)
	require.NotNil(t, in)
	assert.True(t, in.State.Running)
	assert.Equal(t, []string{"sleep"}, in.Config.Cmd)
	assert.Equal(t, container.RestartPolicyDisabled, in.HostConfig.RestartPolicy.Name, "the agent, not the engine, restarts")

	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		hist := h.observedHistory()
		if len(hist) == 0 {
			return errors.New("nothing published")
		}
		last := hist[len(hist)-1]
		if last.ObservedGeneration != 1 || len(last.Instances) != 1 {
			return fmt.Errorf("last observed state %+v", last)
		}
		if err := runningReady(last.Instances[0]); err != nil {
			return err
		}
		if !slices.Equal(last.Instances[0].ContainerIDs, []string{c.ID}) {
			return fmt.Errorf("published container ids %v, want %s", last.Instances[0].ContainerIDs, c.ID)
		}
		return nil
	})

	h.waitPasses(3)
	assert.Len(t, managed(t, h.e.cli, h.e.node), 1, "still one container after more passes")
	assert.EqualValues(t, 1, h.rt.creates.Load(), "created once")
}

func TestAgentAdoptsContainersAfterRestart(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	rev := revision("edge/logs", 1, appTemplate(h.e.image, []string{"sleep"}))
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	before := h.waitInstance(rev, runningReady)
	started := inspectOrNil(t, h.e.cli, before.ContainerIDs[0]).State.StartedAt
	h.stop()

	creates := h.rt.creates.Load()
	h.start(h.config()) // same data dir and runtime, no broker this time
	after := h.waitInstance(rev, runningReady)
	h.waitPasses(3)

	assert.Equal(t, before.ContainerIDs, after.ContainerIDs, "adopted, not recreated")
	assert.Equal(t, creates, h.rt.creates.Load(), "no container created after restart")
	list := managed(t, h.e.cli, h.e.node)
	require.Len(t, list, 1)
	assert.Equal(t, before.ContainerIDs[0], list[0].ID)
	assert.Equal(t, started, inspectOrNil(t, h.e.cli, list[0].ID).State.StartedAt, "not restarted")
	assert.Zero(t, after.Restarts)
}

func TestAgentUpdatesToNewRevision(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	v1 := revision("edge/web", 1, appTemplate(h.e.image, []string{"sleep"}))
	v2 := revision("edge/web", 2, appTemplate(h.e.image, []string{"serve", "8080"}))
	h.start(h.config())
	h.connect()
	h.apply(1, v1)
	old := h.waitInstance(v1, runningReady)

	h.apply(2, v2)
	st := h.waitInstance(v2, runningReady)
	list := h.waitManaged(onlyRevisions(v2))
	assert.Equal(t, []string{list[0].ID}, st.ContainerIDs)
	assert.Nil(t, inspectOrNil(t, h.e.cli, old.ContainerIDs[0]), "old container removed")
	in := inspectOrNil(t, h.e.cli, list[0].ID)
	require.NotNil(t, in)
	assert.True(t, in.State.Running)
	assert.Equal(t, []string{"serve", "8080"}, in.Config.Cmd)
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		if _, found := instanceOf(h.agent, v1); found {
			return errors.New("old revision still reported")
		}
		return nil
	})
}

func TestAgentCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	rev := revision("edge/crasher", 1, appTemplate(h.e.image, []string{"exit", "3"}))
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev, func(st schema.InstanceStatus) error {
		if err := phaseIs(schema.PhaseCrashLoopBackOff)(st); err != nil {
			return err
		}
		if st.Restarts < 3 {
			return fmt.Errorf("%d restarts, want at least 3", st.Restarts)
		}
		return nil
	})
	require.NotNil(t, st.LastExitCode)
	assert.EqualValues(t, 3, *st.LastExitCode)
	assert.False(t, st.Ready)
	assert.Contains(t, st.Message, "back-off")

	list := managed(t, h.e.cli, h.e.node)
	require.Len(t, list, 1, "restarted in place, never recreated")
	assert.Equal(t, []string{list[0].ID}, st.ContainerIDs)
	assert.EqualValues(t, 1, h.rt.creates.Load())

	var restarts []int32
	for _, s := range h.publishedStatuses(rev) {
		restarts = append(restarts, s.Restarts)
	}
	assert.True(t, slices.IsSorted(restarts), "published restarts never decrease: %v", restarts)
	ev := h.waitEvent("Crashed")
	assert.Contains(t, ev.Message, "exited with code 3")
}

func TestAgentReadinessGating(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	rev := revision("edge/gated", 1, appTemplate(h.e.image, []string{"serve", "8080"}, func(p *schema.PodSpec) {
		c := &p.Containers[0]
		c.Ports = []schema.ContainerPort{{Name: "http", ContainerPort: 8080}}
		c.ReadinessProbe = &schema.Probe{
			HTTPGet:       &schema.HTTPGetAction{Path: "/ready", Port: schema.FromString("http")},
			PeriodSeconds: 1,
		}
	}))
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev, phaseIs(schema.PhaseRunning))
	id := st.ContainerIDs[0]
	ip := inspectOrNil(t, h.e.cli, id).NetworkSettings.Networks["bridge"].IPAddress.String()
	url := "http://" + ip + ":8080/ready"
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		code, err := httpStatus(url)
		if err == nil && code != http.StatusServiceUnavailable {
			err = fmt.Errorf("GET %s: %d, want 503 before /tmp/ready exists", url, code)
		}
		return err
	})
	h.waitPasses(4)
	st, _ = instanceOf(h.agent, rev)
	assert.False(t, st.Ready, "not ready while /ready answers 503")
	assert.Nil(t, st.ReadySince)

	execIn(t, h.e.cli, id, "/app", "touch", "/tmp/ready")
	st = h.waitInstance(rev, runningReady)
	require.NotNil(t, st.ReadySince)
	assert.Equal(t, []string{id}, st.ContainerIDs, "same container, not restarted")
	assert.Zero(t, st.Restarts)

	var sawNotReady bool
	for _, s := range h.publishedStatuses(rev) {
		sawNotReady = sawNotReady || s.Phase == schema.PhaseRunning && !s.Ready
	}
	assert.True(t, sawNotReady, "Running but not ready was published before ready")
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		ps := h.publishedStatuses(rev)
		if len(ps) == 0 || runningReady(ps[len(ps)-1]) != nil {
			return errors.New("ready not published yet")
		}
		return nil
	})
}

// httpStatus returns the status code of a GET of url.
func httpStatus(url string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestAgentLivenessFailureRestarts(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	rev := revision("edge/live", 1, appTemplate(h.e.image, []string{"serve", "8080"}, func(p *schema.PodSpec) {
		p.Containers[0].LivenessProbe = &schema.Probe{
			HTTPGet:             &schema.HTTPGetAction{Path: "/healthz", Port: schema.FromInt(8080)},
			InitialDelaySeconds: 1, // the server is listening by then
			PeriodSeconds:       1,
			FailureThreshold:    2,
		}
	}))
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev, runningReady)
	id := st.ContainerIDs[0]
	started := inspectOrNil(t, h.e.cli, id).State.StartedAt
	h.waitPasses(4)
	st, _ = instanceOf(h.agent, rev)
	require.Zero(t, st.Restarts, "healthy container left alone")

	execIn(t, h.e.cli, id, "/app", "touch", "/tmp/unhealthy")
	st = h.waitInstance(rev, func(st schema.InstanceStatus) error {
		if st.Restarts < 1 {
			return fmt.Errorf("%d restarts (%s %s)", st.Restarts, st.Phase, st.Message)
		}
		return nil
	})
	ev := h.waitEvent("Unhealthy")
	assert.Contains(t, ev.Message, "liveness probe failed")
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		in := inspectOrNil(t, h.e.cli, id)
		if in == nil {
			return errors.New("container gone")
		}
		if in.State.StartedAt == started {
			return errors.New("not started again yet")
		}
		return nil
	})
	list := managed(t, h.e.cli, h.e.node)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID, "restarted in place")
}

func TestAgentRemovesUndesiredInstances(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	a := revision("edge/a", 1, appTemplate(h.e.image, []string{"sleep"}))
	b := revision("edge/b", 1, appTemplate(h.e.image, []string{"serve", "8080"}))
	h.start(h.config())
	h.connect()
	h.apply(1, a, b)
	stA := h.waitInstance(a, runningReady)
	stB := h.waitInstance(b, runningReady)

	h.apply(2, b)
	h.waitManaged(onlyRevisions(b))
	assert.Nil(t, inspectOrNil(t, h.e.cli, stA.ContainerIDs[0]), "container of the dropped daemonset removed")
	assert.Equal(t, stB.ContainerIDs, h.waitInstance(b, runningReady).ContainerIDs, "the other daemonset untouched")

	h.apply(3)
	h.waitManaged(onlyRevisions())
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		obs, _ := h.agent.Observed()
		if obs.ObservedGeneration != 3 || len(obs.Instances) != 0 {
			return fmt.Errorf("observed generation %d with %d instances, want 3 with none", obs.ObservedGeneration, len(obs.Instances))
		}
		return nil
	})
}

func TestAgentHostPathReadOnly(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	roDir, rwDir := t.TempDir(), t.TempDir()
	writer := func(dir string, readOnly bool) func(*schema.PodSpec) {
		return func(p *schema.PodSpec) {
			p.Volumes = []schema.Volume{{Name: "data", HostPath: &schema.HostPathVolumeSource{Path: dir}}}
			p.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "data", MountPath: "/mnt", ReadOnly: readOnly}}
		}
	}
	ro := revision("edge/ro", 1, appTemplate(h.e.image, []string{"write", "/mnt/x"}, writer(roDir, true)))
	rw := revision("edge/rw", 1, appTemplate(h.e.image, []string{"write", "/mnt/x"}, writer(rwDir, false)))
	h.start(h.config())
	h.connect()
	h.apply(1, ro, rw)

	exited := func(code int32) func(schema.InstanceStatus) error {
		return func(st schema.InstanceStatus) error {
			if st.LastExitCode == nil || *st.LastExitCode != code {
				return fmt.Errorf("last exit code %v (%s %s), want %d", st.LastExitCode, st.Phase, st.Message, code)
			}
			return nil
		}
	}
	stRO := h.waitInstance(ro, exited(1))
	stRW := h.waitInstance(rw, exited(0))

	_, err := os.Stat(filepath.Join(roDir, "x"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written through the read-only mount")
	_, err = os.Stat(filepath.Join(rwDir, "x"))
	assert.NoError(t, err, "written through the read-write mount")
	for _, c := range []struct {
		id     string
		source string
		rw     bool
	}{{stRO.ContainerIDs[0], roDir, false}, {stRW.ContainerIDs[0], rwDir, true}} {
		in := inspectOrNil(t, h.e.cli, c.id)
		require.NotNil(t, in)
		require.Len(t, in.Mounts, 2, "the hostPath and the termination log")
		m := in.Mounts[0]
		if m.Destination != "/mnt" {
			m = in.Mounts[1]
		}
		assert.Equal(t, c.source, m.Source)
		assert.Equal(t, "/mnt", m.Destination)
		assert.Equal(t, c.rw, m.RW, "RW of the mount of %s", c.source)
	}
}

func TestAgentAppliesResourceLimits(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	rev := revision("edge/limited", 1, appTemplate(h.e.image, []string{"sleep"}, func(p *schema.PodSpec) {
		p.Containers[0].Resources.Limits = schema.ResourceList{"cpu": "250m", "memory": "64Mi"}
	}))
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev, runningReady)
	in := inspectOrNil(t, h.e.cli, st.ContainerIDs[0])
	require.NotNil(t, in)
	assert.EqualValues(t, 250_000_000, in.HostConfig.NanoCPUs)
	assert.EqualValues(t, 64<<20, in.HostConfig.Memory)
}

func TestAgentNeverTouchesForeignContainers(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	node := h.e.node
	v1 := revision("edge/logs", 1, appTemplate(h.e.image, []string{"sleep"}))
	v2 := revision("edge/logs", 2, appTemplate(h.e.image, []string{"serve", "8080"}))
	squat := revision("edge/squat", 1, appTemplate(h.e.image, []string{"sleep"}))
	identity := func(rev schema.Revision) map[string]string {
		return map[string]string{
			edgeagent.LabelNode: node, edgeagent.LabelDaemonSet: rev.DaemonSet,
			edgeagent.LabelRevision: rev.Hash, edgeagent.LabelContainer: "main", edgeagent.LabelIndex: "0",
		}
	}
	lookalike := identity(v1)
	lookalike[edgeagent.LabelManaged] = "false"
	otherNode := identity(v1)
	otherNode[edgeagent.LabelManaged] = "true"
	otherNode[edgeagent.LabelNode] = node + "-other"
	squatName := edgeagent.ContainerName(node, squat.DaemonSet, squat.Hash, "main")
	foreign := map[string]string{
		"lookalike": runForeign(t, h.e, edgeagent.ContainerName(node, v1.DaemonSet, v1.Hash, "main")+"-copy", lookalike),
		"otherNode": runForeign(t, h.e, edgeagent.ContainerName(node+"-other", v1.DaemonSet, v1.Hash, "main"), otherNode),
		"squatter":  runForeign(t, h.e, squatName, map[string]string{"app": "db"}),
	}
	before := map[string]*container.InspectResponse{}
	for name, id := range foreign {
		before[name] = inspectOrNil(t, h.e.cli, id)
	}

	h.start(h.config())
	h.connect()
	h.apply(1, v1, squat)
	h.waitInstance(v1, runningReady)
	st := h.waitInstance(squat, phaseIs(schema.PhaseFailed))
	assert.Contains(t, st.Message, "name in use by another container")
	h.apply(2, v2, squat)
	h.waitInstance(v2, runningReady)
	h.waitManaged(onlyRevisions(v2))
	h.apply(3)
	h.waitManaged(onlyRevisions())
	h.waitPasses(3)

	for name, id := range foreign {
		in := inspectOrNil(t, h.e.cli, id)
		require.NotNil(t, in, "%s container removed", name)
		assert.True(t, in.State.Running, "%s container stopped", name)
		assert.Equal(t, before[name].State.StartedAt, in.State.StartedAt, "%s container restarted", name)
		assert.Equal(t, before[name].Config.Labels, in.Config.Labels, "%s container relabelled", name)
		assert.Equal(t, before[name].Name, in.Name, "%s container renamed", name)
	}
}

func TestAgentOfflineStartFromPersistedState(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	a := revision("edge/a", 1, appTemplate(h.e.image, []string{"sleep"}))
	b := revision("edge/b", 1, appTemplate(h.e.image, []string{"serve", "8080"}))
	h.start(h.config())
	h.connect()
	h.apply(1, a, b)
	oldA := h.waitInstance(a, runningReady)
	oldB := h.waitInstance(b, runningReady)
	h.stop()

	// The device comes back with its containers gone and no broker at all.
	for _, id := range append(oldA.ContainerIDs, oldB.ContainerIDs...) {
		require.NoError(t, h.e.rt.Remove(t.Context(), id))
	}
	require.Empty(t, managed(t, h.e.cli, h.e.node))
	h.conn = newRecordingConn(errors.New("network unreachable"))
	h.start(h.config())
	require.Error(t, h.agent.OnConnect(t.Context()), "every broker call fails")

	newA := h.waitInstance(a, runningReady)
	newB := h.waitInstance(b, runningReady)
	h.waitManaged(onlyRevisions(a, b))
	assert.NotEqual(t, oldA.ContainerIDs, newA.ContainerIDs)
	assert.NotEqual(t, oldB.ContainerIDs, newB.ContainerIDs)
	obs, _ := h.agent.Observed()
	assert.EqualValues(t, 1, obs.ObservedGeneration)
	assert.Empty(t, h.conn.published(schema.NodeTopic(h.e.node, schema.TopicObserved)), "nothing reached a broker")
	assert.Positive(t, h.conn.callCount())
}

func TestAgentSIGKILLMidCreate(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	var revs []schema.Revision
	for _, name := range []string{"a", "b", "c", "d"} {
		revs = append(revs, revision("edge/"+name, 1, appTemplate(h.e.image, []string{"sleep"}, func(p *schema.PodSpec) {
			p.Containers[0].Env = []schema.EnvVar{{Name: "DAEMONSET", Value: name}} // a template, and hash, of its own
		})))
	}
	persistDesired(t, h.dir, h.e.node, h.e.image, revs...)
	require.Empty(t, managed(t, h.e.cli, h.e.node), "the seeding agent ran on a fake engine")

	// Kill the agent process as soon as the first container exists, then
	// a second one once three exist, each restart resuming from agent.db.
	for _, killAt := range []int{1, 3} {
		p := startAgentProcess(t, h.e.node, h.dir)
		checkfor.Eventually(t, agentWait, 2*time.Millisecond, func() error {
			if n := len(managed(t, h.e.cli, h.e.node)); n < killAt {
				return fmt.Errorf("%d containers, waiting for %d", n, killAt)
			}
			return nil
		})
		p.kill(t)
		t.Logf("SIGKILLed the agent at %s", describeContainers(t, h))
	}
	var survivors []string
	for _, c := range managed(t, h.e.cli, h.e.node) {
		survivors = append(survivors, c.ID)
	}
	t.Logf("restarting the agent in-process at %s", describeContainers(t, h))

	h.start(h.config())
	h.connect() // to record its events
	var final []string
	for _, rev := range revs {
		st := h.waitInstance(rev, runningReady)
		final = append(final, st.ContainerIDs...)
	}
	h.waitManaged(onlyRevisions(revs...))
	h.waitPasses(3)
	list := h.waitManaged(onlyRevisions(revs...))
	for _, c := range list {
		assert.Equal(t, "running", string(c.State), "container %s", c.Names)
	}
	t.Logf("survivors %v, final %v", shortIDs(survivors), shortIDs(final))
	assert.Zero(t, h.rt.removes.Load(), "no container of the killed agents removed or replaced")
	for _, rev := range revs {
		for _, st := range h.publishedStatuses(rev) {
			assert.NotEqual(t, schema.PhaseFailed, st.Phase, "%s reported failed: %s", rev.DaemonSet, st.Message)
			if st.Phase != schema.PhaseRunning {
				t.Logf("%s %s: %s", rev.DaemonSet, st.Phase, st.Message)
			}
		}
	}
	for _, p := range h.conn.published(schema.NodeTopic(h.e.node, schema.TopicEvents)) {
		assert.NotContains(t, string(p.payload), `"reason":"Failed"`)
	}
	t.Logf("final agent created %d of %d containers", h.rt.creates.Load(), len(revs))
}

func shortIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id[:12]
	}
	return out
}

// describeContainers summarises the node's containers for the log.
func describeContainers(t *testing.T, h *agentHarness) string {
	var parts []string
	for _, c := range managed(t, h.e.cli, h.e.node) {
		parts = append(parts, c.Labels[edgeagent.LabelDaemonSet]+"="+string(c.State))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d containers [%s]", len(parts), strings.Join(parts, " "))
}

// persistDesired leaves in dir the agent state of a node that accepted a
// desired state of revs: an agent over the in-memory engine receives and
// stores it, then stops.
func persistDesired(t *testing.T, dir, node, image string, revs ...schema.Revision) {
	t.Helper()
	rt := fake.New()
	rt.AddImage(image)
	a, err := edgeagent.New(agentConfig(node, dir, slog.New(slog.NewTextHandler(t.Output(), nil))), rt, newRecordingConn(nil))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deliver(t, a, node, 1, revs...)
	for _, rev := range revs {
		waitInstance(t, a, rev, runningReady)
	}
	cancel()
	require.NoError(t, <-done)
}

// agentProcess is the test binary re-executed as an agent (see TestMain).
type agentProcess struct {
	cmd    *exec.Cmd
	out    bytes.Buffer // stdout and stderr; read only after Wait
	waited bool
}

// startAgentProcess starts an offline agent of node on dir in a process of
// its own; cleanup kills it if the test has not.
func startAgentProcess(t *testing.T, node, dir string) *agentProcess {
	t.Helper()
	p := &agentProcess{cmd: exec.Command(os.Args[0])}
	p.cmd.Env = append(os.Environ(), envAgentNode+"="+node, envAgentDir+"="+dir)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() { p.kill(t) })
	return p
}

// kill sends SIGKILL and waits for the process to be gone, logging what it
// wrote; it is safe to call twice.
func (p *agentProcess) kill(t *testing.T) {
	t.Helper()
	if p.waited {
		return
	}
	p.waited = true
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	err := p.cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	ws, _ := exit.Sys().(syscall.WaitStatus)
	assert.Equal(t, syscall.SIGKILL, ws.Signal(), "agent process died of SIGKILL, not on its own")
	t.Logf("agent process output:\n%s", p.out.String())
}
