package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// The downtime benchmark's knobs (make bench-prefetch sets them; the
// defaults keep the test small for make test).
const (
	envPrefetchNodes = "EDGESET_PREFETCH_NODES"       // devices, default 4
	envPrefetchImage = "EDGESET_PREFETCH_IMAGE_BYTES" // each new image's size, default 100000
	envPrefetchLink  = "EDGESET_PREFETCH_LINK_BPS"    // each device's link, bytes/s, default 200000
)

func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "%s", name)
	require.Positive(t, n, "%s", name)
	return n
}

// cameraDaemonSet is the benchmark's daemon: image, rolled out 50% at a
// time, with download before switch when prefetch is set.
func cameraDaemonSet(image string, prefetch bool) string {
	rollout := ""
	if prefetch {
		rollout = "  rollout:\n    prefetch: {maxConcurrentPerSite: 2}\n"
	}
	return `apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: camera, namespace: edge}
spec:
  selector: {matchLabels: {app: camera}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 50%}}
` + rollout + `  template:
    metadata: {labels: {app: camera}}
    spec:
      containers:
      - {name: camera, image: "` + image + `"}
`
}

// TestPrefetchDowntime runs a controller and a simulated fleet whose
// devices pull images over a slow link (200 KB/s by default), and rolls a
// daemon out twice: to camera:2 as a plain rolling update, then to
// camera:3 with spec.rollout.prefetch. Without prefetch every device
// pulls the new image after its old instance stopped, so its daemon is
// down for the download; with prefetch every device had the image before
// its old instance stopped. It logs each node's downtime (make
// bench-prefetch, docs/benchmarks.md) and asserts the orderings, not the
// figures.
func TestPrefetchDowntime(t *testing.T) {
	nodes := int(envInt(t, envPrefetchNodes, 4))
	size := envInt(t, envPrefetchImage, 100_000)
	link := envInt(t, envPrefetchLink, 200_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	c, err := controller.New(controller.Config{DataDir: dir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-ctlDone) }()
	<-c.Synced()
	secret, err := ReadFleetSecret(filepath.Join(dir, credential.SecretFile))
	require.NoError(t, err)
	shape, err := ParseShape(fmt.Appendf(nil, `seed: 3
labels:
  site: {a: 0.5, b: 0.5}
behaviour:
  preloadedImages: ["camera:1"]
  startLatency: {min: 200ms}
  linkBytesPerSecond: %d
  defaultImageSize: %d
`, link, size))
	require.NoError(t, err)
	f, err := New(Options{BrokerURL: "tcp://" + c.MQTTAddr().String(), Nodes: nodes, Tokens: SecretTokens(secret),
		Shape: shape, Ramp: 200, RecordDowntime: true, Backoff: mqttBackoffForTests})
	require.NoError(t, err)
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan error, 1)
	go func() { simDone <- f.Run(simCtx) }()
	defer func() { stopSim(); require.NoError(t, <-simDone) }()

	cl := api.NewClient("http://"+c.APIAddr().String(), c.Token(), nil)
	rollOut(ctx, t, cl, cameraDaemonSet("camera:1", false), nodes)
	plainStart := time.Now()
	plain := rollOut(ctx, t, cl, cameraDaemonSet("camera:2", false), nodes)
	plainTook := time.Since(plainStart)
	prefetchStart := time.Now()
	fetched := rollOut(ctx, t, cl, cameraDaemonSet("camera:3", true), nodes)
	prefetchTook := time.Since(prefetchStart)

	ds, err := cl.GetDaemonSet(ctx, "edge/camera")
	require.NoError(t, err)
	require.NotNil(t, ds.Status.Rollout.Prefetch)
	assert.Equal(t, api.RolloutPrefetch{Nodes: nodes, Done: nodes}, *ds.Status.Rollout.Prefetch, "every node prefetched")

	without, with := switchesTo(f.Downtimes(), plain), switchesTo(f.Downtimes(), fetched)
	require.Len(t, without, nodes, "one switch per node to camera:2: %+v", f.Downtimes())
	require.Len(t, with, nodes, "one switch per node to camera:3: %+v", f.Downtimes())
	for _, d := range without {
		assert.True(t, d.ImagePulled.After(d.Stopped), "node %s pulled camera:2 at %s, after its old instance stopped at %s",
			d.Node, d.ImagePulled, d.Stopped)
	}
	for _, d := range with {
		assert.False(t, d.ImagePulled.IsZero(), "node %s pulled camera:3", d.Node)
		assert.True(t, d.ImagePulled.Before(d.Stopped), "node %s had camera:3 at %s, before its old instance stopped at %s",
			d.Node, d.ImagePulled, d.Stopped)
	}
	t.Logf("%d nodes, image %d bytes, link %d bytes/s (%s a pull)", nodes, size, link,
		time.Duration(float64(size)/float64(link)*float64(time.Second)))
	logDowntimes(t, "without prefetch", without, plainTook)
	logDowntimes(t, "with prefetch", with, prefetchTook)
}

// rollOut applies manifest and waits for its rollout to complete on
// nodes nodes; it returns the revision rolled out.
func rollOut(ctx context.Context, t *testing.T, cl *api.Client, manifest string, nodes int) string {
	t.Helper()
	_, err := cl.Apply(ctx, "camera.yaml", []byte(manifest), false)
	require.NoError(t, err)
	var hash string
	checkfor.Eventually(t, 5*time.Minute, 50*time.Millisecond, func() error {
		ds, err := cl.GetDaemonSet(ctx, "edge/camera")
		if err != nil {
			return err
		}
		r := ds.Status.Rollout
		if r == nil || r.Target != ds.CurrentHash || !r.Complete || r.Updated != nodes {
			return fmt.Errorf("rollout %+v, want %s complete on %d nodes", r, ds.CurrentHash, nodes)
		}
		hash = ds.CurrentHash
		return nil
	})
	return hash
}

func switchesTo(all []Downtime, rev string) []Downtime {
	return slices.DeleteFunc(slices.Clone(all), func(d Downtime) bool { return d.To != rev })
}

// logDowntimes logs each node's downtime and their minimum, median and
// maximum.
func logDowntimes(t *testing.T, what string, ds []Downtime, took time.Duration) {
	durations := make([]time.Duration, len(ds))
	for i, d := range ds {
		durations[i] = d.Duration()
		t.Logf("%s: node %s down %s", what, d.Node, d.Duration().Round(time.Millisecond))
	}
	slices.Sort(durations)
	t.Logf("%s: downtime per node min %s, median %s, max %s; rollout took %s", what,
		durations[0].Round(time.Millisecond), durations[len(durations)/2].Round(time.Millisecond),
		durations[len(durations)-1].Round(time.Millisecond), took.Round(100*time.Millisecond))
}
