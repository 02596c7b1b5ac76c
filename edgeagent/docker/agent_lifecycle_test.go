package docker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestAgentInitContainersAndSidecar runs an instance with an init container
// and a sidecar on the real engine: the init container completes before
// the others start, in a network namespace of its own; the sidecar owns the
// namespace the main container joins; removal takes them all.
func TestAgentInitContainersAndSidecar(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	always := schema.RestartPolicyAlways
	tmpl := appTemplate(h.e.image, []string{"sleep"}, func(p *schema.PodSpec) {
		p.InitContainers = []schema.Container{
			{Name: "setup", Image: h.e.image, ImagePullPolicy: schema.PullNever, Args: []string{"exit", "0"}},
			{Name: "proxy", Image: h.e.image, ImagePullPolicy: schema.PullNever, Args: []string{"sleep"}, RestartPolicy: &always},
		}
	})
	rev := revision("edge/with-init", 1, tmpl)
	h.start(h.config())
	h.connect()
	h.apply(1, rev)

	st := h.waitInstance(rev, runningReady)
	require.Len(t, st.ContainerIDs, 3, "main, then the init containers")
	mainC := inspectOrNil(t, h.e.cli, st.ContainerIDs[0])
	setup := inspectOrNil(t, h.e.cli, st.ContainerIDs[1])
	proxy := inspectOrNil(t, h.e.cli, st.ContainerIDs[2])
	require.NotNil(t, mainC)
	require.NotNil(t, setup)
	require.NotNil(t, proxy)
	assert.Equal(t, "0", setup.Config.Labels[edgeagent.LabelInitIndex])
	assert.Empty(t, setup.Config.Labels[edgeagent.LabelIndex], "init containers carry no LabelIndex")
	assert.False(t, setup.State.Running, "the completed init container is kept, exited")
	assert.Equal(t, 0, setup.State.ExitCode)
	assert.True(t, proxy.State.Running)
	assert.Equal(t, fmt.Sprintf("container:%s", proxy.ID), string(mainC.HostConfig.NetworkMode), "the sidecar owns the namespace")
	assert.NotContains(t, string(setup.HostConfig.NetworkMode), "container:", "the init container before the owner has its own")
	finished, err := time.Parse(time.RFC3339Nano, setup.State.FinishedAt)
	require.NoError(t, err)
	started, err := time.Parse(time.RFC3339Nano, mainC.State.StartedAt)
	require.NoError(t, err)
	assert.True(t, finished.Before(started), "init completed (%s) before the main container started (%s)", finished, started)
	assert.Zero(t, st.Restarts)

	h.apply(2)
	h.waitManaged(func(list []container.Summary) error {
		if len(list) > 0 {
			return fmt.Errorf("%d containers left", len(list))
		}
		return nil
	})
}

// TestLogServerPreviousOnEngine reads the previous run of a container
// restarted in place from the real engine, tail included (the engine tails
// before it applies until, so the agent tails the run itself).
func TestLogServerPreviousOnEngine(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("prev", "sleep")
	spec.Labels[edgeagent.LabelDaemonSet] = "edge/prev"
	spec.Labels[edgeagent.LabelContainer] = "main"
	spec.Labels[edgeagent.LabelIndex] = "0"
	id := e.run(t, spec)
	e.waitLog(t, id, "app: sleeping")
	require.NoError(t, e.rt.Stop(t.Context(), id, 10*time.Second))
	require.NoError(t, e.rt.Start(t.Context(), id))
	e.waitLog(t, id, "app: sleeping\napp: terminated, exiting\napp: sleeping")

	conn := newRecordingConn(nil)
	s := edgeagent.NewLogServer(edgeagent.LogServerOptions{NodeName: e.node, Runtime: e.rt, Conn: conn})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	req, err := schema.Encode(schema.LogRequest{SchemaVersion: schema.WireVersion, Node: e.node, ID: "prev1", DaemonSet: "edge/prev", Tail: 1, Previous: true})
	require.NoError(t, err)
	s.Handle(req)

	text := streamText(t, conn, e.node)
	assert.Equal(t, "app: terminated, exiting\n", text, "the last line of the previous run")
}

// TestLogServerPreviousRunAloneOnEngine: with the agent's knowledge of
// where the previous run's log begins, --previous serves that run alone, not every earlier one, on the
// real engine's timestamps; restarts follow each other at once, as a
// liveness kill's does.
func TestLogServerPreviousRunAloneOnEngine(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("prev2", "sleep")
	spec.Labels[edgeagent.LabelDaemonSet] = "edge/prev2"
	spec.Labels[edgeagent.LabelContainer] = "main"
	spec.Labels[edgeagent.LabelIndex] = "0"
	id := e.run(t, spec)
	e.waitLog(t, id, "app: sleeping")
	restart := func() edgeagent.ContainerState {
		require.NoError(t, e.rt.Stop(t.Context(), id, 10*time.Second))
		require.NoError(t, e.rt.Start(t.Context(), id))
		st, err := e.rt.Inspect(t.Context(), id)
		require.NoError(t, err)
		return st
	}
	second := restart() // its FinishedAt is the end of the first run
	e.waitLog(t, id, "app: sleeping\napp: terminated, exiting\napp: sleeping")
	third := restart()
	e.waitLog(t, id, strings.Repeat("app: sleeping\napp: terminated, exiting\n", 2)+"app: sleeping")

	conn := newRecordingConn(nil)
	s := edgeagent.NewLogServer(edgeagent.LogServerOptions{NodeName: e.node, Runtime: e.rt, Conn: conn,
		PreviousRunSince: func(cid string, current time.Time) (time.Time, bool) {
			// As the agent's run history places it: between the end of
			// the first run and the second's start.
			return second.FinishedAt.Add(second.StartedAt.Sub(second.FinishedAt) / 2), cid == id && current.Equal(third.StartedAt)
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	req, err := schema.Encode(schema.LogRequest{SchemaVersion: schema.WireVersion, Node: e.node, ID: "prev2", DaemonSet: "edge/prev2", Previous: true})
	require.NoError(t, err)
	s.Handle(req)

	text := streamText(t, conn, e.node)
	assert.Equal(t, "app: sleeping\napp: terminated, exiting\n", text, "the second run alone")
}

// streamText waits until the log stream published on node's logs/response
// topic has ended and returns its text; an error chunk fails the test.
func streamText(t *testing.T, conn *recordingConn, node string) string {
	t.Helper()
	var text strings.Builder
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		text.Reset()
		for _, p := range conn.published(schema.NodeTopic(node, schema.TopicLogsResponse)) {
			c, err := schema.DecodeLogChunk(p.payload)
			require.NoError(t, err)
			require.Empty(t, c.Error)
			text.WriteString(c.Data)
			if c.EOF {
				return nil
			}
		}
		return errors.New("stream not finished")
	})
	return text.String()
}
