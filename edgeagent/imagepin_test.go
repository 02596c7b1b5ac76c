package edgeagent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/schema"
)

const pinnedImage = "registry.local/collector:1.4"

var (
	pinnedManifest = "sha256:" + strings.Repeat("1", 64)
	pinnedConfig   = "sha256:" + strings.Repeat("2", 64)
	tamperedConfig = "sha256:" + strings.Repeat("e", 64)
	collectorPin   = schema.ImagePin{Image: pinnedImage, Digest: pinnedManifest, Config: pinnedConfig}
)

// pinnedRevision is a revision of one container running image, pinned
// (as the controller pins it) to pin.
func pinnedRevision(image string, pin schema.ImagePin, mods ...func(*schema.PodSpec)) schema.Revision {
	return testRevision("edge/collector", schema.WithImagePins(testTemplate(image, mods...), []schema.ImagePin{pin}))
}

// storeFetcher is the controller's image store: a fetch by digest loads
// the content it holds for that digest (into the fake engine, under the
// reference), fails with err while err is set.
type storeFetcher struct {
	rt      *fake.Runtime
	configs map[string]string // manifest digest to the config digest it loads as

	mu      sync.Mutex
	err     error
	byName  []string // references fetched by name
	fetched []string // digests fetched
}

func (f *storeFetcher) setErr(err error) { f.mu.Lock(); defer f.mu.Unlock(); f.err = err }

func (f *storeFetcher) calls() (byName, byDigest []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.byName...), append([]string(nil), f.fetched...)
}

func (f *storeFetcher) FetchImage(_ context.Context, image string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName = append(f.byName, image)
	return errors.New("fetch by name: not in this test's store")
}

func (f *storeFetcher) FetchImageDigest(_ context.Context, image, digest string, _ func(done, total int64)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, digest)
	if f.err != nil {
		return f.err
	}
	config, ok := f.configs[digest]
	if !ok {
		return errors.New("manifest " + digest + ": not in the image store")
	}
	f.rt.SetImage(image, config)
	return nil
}

var _ edgeagent.DigestFetcher = (*storeFetcher)(nil)

func startPinned(t *testing.T, withFetcher bool, setup func(h *harness, f *storeFetcher)) (*harness, *storeFetcher) {
	t.Helper()
	h := newHarness(t)
	f := &storeFetcher{rt: h.rt.Runtime, configs: map[string]string{pinnedManifest: pinnedConfig}}
	cfg := h.config()
	if withFetcher {
		cfg.Images = f
	}
	if setup != nil {
		setup(h, f)
	}
	h.start(cfg)
	h.connect()
	return h, f
}

func mismatch(st schema.InstanceStatus) error {
	if st.Phase != schema.PhaseFailed || !strings.Contains(st.Message, "image digest mismatch") {
		return errors.New("phase " + st.Phase + " (" + st.Message + "), want Failed with an image digest mismatch")
	}
	return nil
}

// runningFrom checks that the instance's only container runs and was
// created from image.
func runningFrom(t *testing.T, h *harness, image string) {
	t.Helper()
	list := h.managed()
	require.Len(t, list, 1)
	assert.True(t, list[0].Running)
	assert.Equal(t, image, list[0].Image)
}

func TestPinnedImagePresent(t *testing.T) {
	h, f := startPinned(t, true, func(h *harness, _ *storeFetcher) { h.rt.SetImage(pinnedImage, pinnedConfig) })
	rev := pinnedRevision(pinnedImage, collectorPin)
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	runningFrom(t, h, pinnedImage)
	byName, byDigest := f.calls()
	assert.Empty(t, byName)
	assert.Empty(t, byDigest, "the engine holds the pinned content: nothing fetched")
	assert.Zero(t, h.rt.Stats().Pulls)
}

// TestPinnedImageAbsentFetchedByDigest: absent, the registry unreachable:
// fetched from the controller by the pinned manifest digest.
func TestPinnedImageAbsentFetchedByDigest(t *testing.T) {
	h, f := startPinned(t, true, func(h *harness, _ *storeFetcher) {
		h.rt.ImagePullFailure = func(string) error { return errors.New("dial registry.local: no route to host") }
	})
	rev := pinnedRevision(pinnedImage, collectorPin)
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	runningFrom(t, h, pinnedImage)
	_, byDigest := f.calls()
	assert.Equal(t, []string{pinnedManifest}, byDigest)
	id, err := h.rt.ImageIdentity(t.Context(), pinnedImage)
	require.NoError(t, err)
	assert.Equal(t, pinnedConfig, id.ID)
}

// TestPinnedImageFromRegistry: a registry that serves the pinned content
// under the tag is enough; one that serves other content is not, and the
// controller's copy is fetched instead.
func TestPinnedImageFromRegistry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		served    string
		wantFetch bool
	}{
		{"registry serves the pinned content", pinnedConfig, false},
		{"registry serves other content under the tag", tamperedConfig, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f := startPinned(t, true, func(h *harness, _ *storeFetcher) {
				h.rt.SetRegistryImage(pinnedImage, tc.served)
			})
			rev := pinnedRevision(pinnedImage, collectorPin)
			h.apply(1, rev)
			h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
			runningFrom(t, h, pinnedImage)
			assert.Equal(t, 1, h.rt.Stats().Pulls)
			_, byDigest := f.calls()
			assert.Equal(t, tc.wantFetch, len(byDigest) == 1, "fetched: %v", byDigest)
			id, err := h.rt.ImageIdentity(t.Context(), pinnedImage)
			require.NoError(t, err)
			assert.Equal(t, pinnedConfig, id.ID, "what runs is the pinned content")
		})
	}
}

// TestTamperedImageRefused: the engine holds other content under the
// pinned reference and the pinned content cannot be had: Failed with an
// ImageDigestMismatch message and event, nothing created; once the
// controller can serve it, it is fetched by digest and runs.
func TestTamperedImageRefused(t *testing.T) {
	h, f := startPinned(t, true, func(h *harness, f *storeFetcher) {
		h.rt.SetImage(pinnedImage, tamperedConfig)
		f.setErr(errors.New("controller unreachable"))
	})
	rev := pinnedRevision(pinnedImage, collectorPin, func(p *schema.PodSpec) { p.Containers[0].ImagePullPolicy = schema.PullIfNotPresent })
	h.rt.ImagePullFailure = func(string) error { return errors.New("no registry") }
	h.apply(1, rev)

	st := h.waitInstance(rev.DaemonSet, rev.Hash, mismatch)
	for _, want := range []string{pinnedImage, tamperedConfig, pinnedConfig, pinnedManifest, "not run", "controller unreachable"} {
		assert.Contains(t, st.Message, want)
	}
	ev := assertEvent(t, h, "ImageDigestMismatch")
	assert.Equal(t, schema.EventWarning, ev.Type)
	assert.Equal(t, rev.DaemonSet, ev.DaemonSet)
	assert.Contains(t, ev.Message, tamperedConfig)
	h.waitPasses(5)
	assert.Zero(t, h.rt.Stats().Creates, "the tampered image never runs")
	h.waitInstance(rev.DaemonSet, rev.Hash, mismatch) // still Failed while it backs off

	f.setErr(nil)
	h.clock.Advance(time.Minute)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	runningFrom(t, h, pinnedImage)
	id, err := h.rt.ImageIdentity(t.Context(), pinnedImage)
	require.NoError(t, err)
	assert.Equal(t, pinnedConfig, id.ID)
}

// TestTamperedImageNeverPulled: pull policy Never and no image-url: the
// tampered image is refused, no fetch, no pull.
func TestTamperedImageNeverPulled(t *testing.T) {
	h, f := startPinned(t, false, func(h *harness, _ *storeFetcher) { h.rt.SetImage(pinnedImage, tamperedConfig) })
	rev := pinnedRevision(pinnedImage, collectorPin, func(p *schema.PodSpec) { p.Containers[0].ImagePullPolicy = schema.PullNever })
	h.apply(1, rev)
	st := h.waitInstance(rev.DaemonSet, rev.Hash, mismatch)
	assert.Contains(t, st.Message, "pull policy is Never")
	assertEvent(t, h, "ImageDigestMismatch")
	assert.Zero(t, h.rt.Stats().Pulls)
	assert.Zero(t, h.rt.Stats().Creates)
	_, byDigest := f.calls()
	assert.Empty(t, byDigest)

	// The operator removes the tampered image: with nothing under the
	// tag the instance waits for the image as ErrImageNeverPull would.
	h.rt.RemoveImage(pinnedImage)
	h.clock.Advance(time.Minute)
	st = h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhaseErrImagePull))
	assert.Contains(t, st.Message, "not present")
}

// TestPinnedContentByID: the tag moved to other content (another
// revision's, say) while the pinned content is still in the engine: the
// container is created from the pinned content by its ID, nothing
// fetched.
func TestPinnedContentByID(t *testing.T) {
	h, f := startPinned(t, true, func(h *harness, _ *storeFetcher) {
		h.rt.SetImage(pinnedImage, pinnedConfig)
		h.rt.SetImage(pinnedImage, tamperedConfig) // the tag moves on; the pinned content stays
	})
	rev := pinnedRevision(pinnedImage, collectorPin)
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	runningFrom(t, h, pinnedConfig)
	byName, byDigest := f.calls()
	assert.Empty(t, byName)
	assert.Empty(t, byDigest)
}

// TestPinnedInitContainer: init containers are checked as containers are.
func TestPinnedInitContainer(t *testing.T) {
	h, _ := startPinned(t, false, func(h *harness, _ *storeFetcher) { h.rt.SetImage(pinnedImage, tamperedConfig) })
	tmpl := testTemplate("busybox:1.36", func(p *schema.PodSpec) {
		p.InitContainers = []schema.Container{{Name: "setup", Image: pinnedImage, ImagePullPolicy: schema.PullNever}}
	})
	rev := testRevision("edge/collector", schema.WithImagePins(tmpl, []schema.ImagePin{collectorPin}))
	h.apply(1, rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, mismatch)
	assertEvent(t, h, "ImageDigestMismatch")
	assert.Zero(t, h.rt.Stats().Creates, "neither the init container nor the main one is created")
}
