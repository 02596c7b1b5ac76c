package edgeagent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// blindRuntime lists nothing, so the agent only meets existing containers
// through name conflicts.
type blindRuntime struct{ *countingRuntime }

func (r blindRuntime) List(ctx context.Context, node string) ([]edgeagent.ContainerState, error) {
	r.lists.Add(1)
	return nil, nil
}

func TestNameConflictAdoptsSameContainer(t *testing.T) {
	h := newHarness(t)
	specs, err := edgeagent.BuildSpecs(testNode, revA.DaemonSet, revA.Hash, revA.Template)
	require.NoError(t, err)
	id := createStarted(t, h.rt.Runtime, specs[0])

	a, err := edgeagent.New(h.config(), blindRuntime{h.rt}, h.conn)
	require.NoError(t, err)
	h.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	h.connect()
	h.apply(1, revA)

	st := h.waitInstance(revA.DaemonSet, revA.Hash, runningReady)
	assert.Equal(t, []string{id}, st.ContainerIDs)
	assert.Equal(t, 1, h.rt.Stats().Creates, "adopted after ErrNameConflict, not recreated")
}

func TestNameConflictWithForeignContainerFails(t *testing.T) {
	h := newHarness(t)
	specs, err := edgeagent.BuildSpecs(testNode, revA.DaemonSet, revA.Hash, revA.Template)
	require.NoError(t, err)
	squatter := edgeagent.ContainerSpec{Name: specs[0].Name, Image: "busybox:1.36", Labels: map[string]string{"owner": "someone"}}
	id := createStarted(t, h.rt.Runtime, squatter)

	h.start(h.config())
	h.connect()
	h.apply(1, revA)
	st := h.waitInstance(revA.DaemonSet, revA.Hash, phaseIs(schema.PhaseFailed))
	assert.Contains(t, st.Message, "name in use by another container")
	c, err := h.rt.Inspect(context.Background(), id)
	require.NoError(t, err)
	assert.True(t, c.Running, "the foreign container is left alone")
}

func TestHTTPReadinessProbeWithHostNetwork(t *testing.T) {
	srv := newHealthServer(t)
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.HostNetwork = true
		p.Containers[0].ReadinessProbe = &schema.Probe{
			HTTPGet: &schema.HTTPGetAction{Path: "/ready", Port: schema.FromInt(int32(srv.port))}, PeriodSeconds: 1, TimeoutSeconds: 200,
		}
	})
	rev := testRevision("edge/http", tmpl)
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseRunning))
	h.waitPasses(5)
	st, _ := h.instance(rev.DaemonSet, rev.Hash)
	assert.False(t, st.Ready)

	srv.ready.Store(true)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
}
