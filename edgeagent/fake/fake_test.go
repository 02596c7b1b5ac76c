package fake

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
)

func spec(name string) edgeagent.ContainerSpec {
	return edgeagent.ContainerSpec{Name: name, Image: "img:1", Labels: map[string]string{
		edgeagent.LabelManaged: "true", edgeagent.LabelNode: "n1",
	}}
}

func newRuntime() *Runtime {
	r := New()
	r.AddImage("img:1")
	return r
}

func TestCreateFollowsDockerRules(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	id, err := r.Create(ctx, spec("ca"))
	require.NoError(t, err)

	_, err = r.Create(ctx, spec("ca"))
	assert.ErrorIs(t, err, edgeagent.ErrNameConflict)
	_, err = r.Create(ctx, spec("_bad"))
	assert.ErrorContains(t, err, "invalid container name")
	missing := spec("cb")
	missing.Image = "absent:1"
	_, err = r.Create(ctx, missing)
	assert.ErrorContains(t, err, "no such image")

	byName, err := r.Inspect(ctx, "ca")
	require.NoError(t, err)
	assert.Equal(t, id, byName.ID)
	assert.False(t, byName.Running)
	assert.True(t, byName.StartedAt.IsZero())
}

func TestListOnlyManagedOfNode(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	_, err := r.Create(ctx, spec("mine"))
	require.NoError(t, err)
	other := spec("other")
	other.Labels[edgeagent.LabelNode] = "n2"
	_, err = r.Create(ctx, other)
	require.NoError(t, err)
	_, err = r.Create(ctx, edgeagent.ContainerSpec{Name: "foreign", Image: "img:1"})
	require.NoError(t, err)

	list, err := r.List(ctx, "n1")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "mine", list[0].Name)
	assert.Len(t, r.Containers(), 3)
}

func TestPullPolicies(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	pullErr := errors.New("manifest unknown")
	r.ImagePullFailure = func(image string) error {
		if image == "broken:1" {
			return pullErr
		}
		return nil
	}
	assert.ErrorIs(t, r.PullImage(ctx, "new:1", "Never", nil), edgeagent.ErrImageNotPresent)
	assert.NoError(t, r.PullImage(ctx, "img:1", "Never", nil))
	assert.NoError(t, r.PullImage(ctx, "img:1", "IfNotPresent", nil))
	assert.Zero(t, r.Stats().Pulls)
	assert.NoError(t, r.PullImage(ctx, "img:1", "Always", nil))
	assert.NoError(t, r.PullImage(ctx, "new:1", "IfNotPresent", nil))
	assert.Equal(t, 2, r.Stats().Pulls)
	assert.ErrorIs(t, r.PullImage(ctx, "broken:1", "IfNotPresent", nil), pullErr)
}

func TestSharedNetworkNamespace(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	owner, err := r.Create(ctx, spec("owner"))
	require.NoError(t, err)
	fs := spec("follower")
	fs.NetworkOf = owner
	follower, err := r.Create(ctx, fs)
	require.NoError(t, err)

	assert.ErrorContains(t, r.Start(ctx, follower), "non running container")
	require.NoError(t, r.Start(ctx, owner))
	require.NoError(t, r.Start(ctx, follower))
	o, _ := r.Inspect(ctx, owner)
	f, _ := r.Inspect(ctx, follower)
	assert.NotEmpty(t, o.IPAddress)
	assert.Equal(t, o.IPAddress, f.IPAddress)

	bad := spec("orphan")
	bad.NetworkOf = "nope"
	_, err = r.Create(ctx, bad)
	assert.ErrorIs(t, err, edgeagent.ErrNotFound)
}

func TestLifecycleAndEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRuntime()
	events, errs := r.Events(ctx)
	id, err := r.Create(ctx, spec("ca"))
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, id))
	require.NoError(t, r.Start(ctx, id), "starting a running container is a no-op")
	require.NoError(t, r.Crash(id, 2))
	c, err := r.Inspect(ctx, id)
	require.NoError(t, err)
	assert.False(t, c.Running)
	assert.Equal(t, 2, c.ExitCode)
	require.NoError(t, r.Start(ctx, id))
	require.NoError(t, r.Stop(ctx, id, time.Second))
	c, _ = r.Inspect(ctx, id)
	assert.Equal(t, ExitCodeTerm, c.ExitCode)
	require.NoError(t, r.Remove(ctx, id))
	require.NoError(t, r.Remove(ctx, id), "removing a missing container is not an error")
	_, err = r.Inspect(ctx, id)
	assert.ErrorIs(t, err, edgeagent.ErrNotFound)

	var actions []string
	for len(actions) < 6 {
		select {
		case ev := <-events:
			assert.Equal(t, id, ev.ContainerID)
			assert.Equal(t, "n1", ev.Labels[edgeagent.LabelNode])
			actions = append(actions, ev.Action)
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far: %v", actions)
		}
	}
	assert.Equal(t, []string{"create", "start", "die", "start", "die", "destroy"}, actions)
	cancel()
	assert.ErrorIs(t, <-errs, context.Canceled)
}

func TestEventOverflowEndsStream(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	r.EventBuffer = 2
	_, errs := r.Events(ctx)
	for _, n := range []string{"ca", "cb", "cc"} {
		_, err := r.Create(ctx, spec(n))
		require.NoError(t, err)
	}
	assert.ErrorIs(t, <-errs, ErrEventOverflow)
}

func TestCrashAfter(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	r.CrashAfter = func(edgeagent.ContainerSpec) (int, time.Duration, bool) { return 7, time.Millisecond, true }
	id, err := r.Create(ctx, spec("ca"))
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, id))
	checkfor.Eventually(t, 5*time.Second, time.Millisecond, func() error {
		c, err := r.Inspect(ctx, id)
		switch {
		case err != nil:
			return err
		case c.Running:
			return errors.New("container did not crash")
		}
		assert.Equal(t, 7, c.ExitCode)
		return nil
	})
}

func TestExecAndKillAll(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	r.ExecResult = func(c edgeagent.ContainerState, cmd []string) (int, []byte, error) {
		return len(cmd), []byte("out"), nil
	}
	id, err := r.Create(ctx, spec("ca"))
	require.NoError(t, err)
	_, _, err = r.Exec(ctx, id, []string{"x"})
	assert.ErrorContains(t, err, "not running")
	require.NoError(t, r.Start(ctx, id))
	code, out, err := r.Exec(ctx, id, []string{"x", "y"})
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.Equal(t, "out", string(out))

	r.KillAll()
	c, _ := r.Inspect(ctx, id)
	assert.False(t, c.Running)
	assert.Equal(t, ExitCodeKill, c.ExitCode)
	assert.Error(t, r.Crash(id, 1), "crashing a stopped container")
}

func BenchmarkStartStop(b *testing.B) {
	ctx := context.Background()
	r := newRuntime()
	id, err := r.Create(ctx, spec("ca"))
	require.NoError(b, err)
	for b.Loop() {
		_ = r.Start(ctx, id)
		_ = r.Stop(ctx, id, 0)
	}
}

func TestSingleCharacterNamesRejectedLikeDocker(t *testing.T) {
	_, err := newRuntime().Create(context.Background(), spec("a"))
	assert.ErrorContains(t, err, "invalid container name")
}

func TestOOMKillAndRestartKeepDockerState(t *testing.T) {
	ctx := context.Background()
	r := newRuntime()
	r.RecordHistory = true
	id, err := r.Create(ctx, spec("ca"))
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, id))
	st, err := r.Inspect(ctx, id)
	require.NoError(t, err)
	assert.True(t, st.FinishedAt.IsZero(), "never exited")

	require.NoError(t, r.OOMKill(id))
	st, err = r.Inspect(ctx, id)
	require.NoError(t, err)
	assert.True(t, st.OOMKilled)
	assert.Equal(t, ExitCodeKill, st.ExitCode)
	assert.False(t, st.Running)
	assert.Error(t, r.OOMKill(id), "not running")
	finished := st.FinishedAt

	require.NoError(t, r.Start(ctx, id))
	st, err = r.Inspect(ctx, id)
	require.NoError(t, err)
	assert.False(t, st.OOMKilled, "a new run clears OOMKilled")
	assert.Equal(t, finished, st.FinishedAt, "FinishedAt keeps the end of the previous run, as in Docker")
	require.NoError(t, r.Stop(ctx, id, time.Second))
	require.NoError(t, r.Stop(ctx, id, time.Second))
	require.NoError(t, r.Remove(ctx, id))
	assert.Equal(t, []Op{{"create", "ca"}, {"start", "ca"}, {"start", "ca"}, {"stop", "ca"}, {"remove", "ca"}}, r.History(),
		"stopping a stopped container is not recorded")
}
