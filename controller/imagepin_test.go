package controller

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// mapResolver resolves the references it holds.
type mapResolver map[string]schema.ImagePin

func (m mapResolver) ResolveImage(ref string) (schema.ImagePin, bool) {
	p, ok := m[ref]
	return p, ok
}

func digestOf(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func pinOf(image string, c byte) schema.ImagePin {
	return schema.ImagePin{Image: image, Digest: digestOf(c), Config: "sha256:" + strings.Repeat(string(c), 63) + "f"}
}

func podTemplate(init []string, images ...string) schema.PodTemplateSpec {
	t := schema.PodTemplateSpec{Metadata: schema.ObjectMeta{Labels: map[string]string{"app": "x"}}}
	for i, im := range init {
		t.Spec.InitContainers = append(t.Spec.InitContainers, schema.Container{Name: fmt.Sprintf("i%d", i), Image: im})
	}
	for i, im := range images {
		t.Spec.Containers = append(t.Spec.Containers, schema.Container{Name: fmt.Sprintf("c%d", i), Image: im})
	}
	return t
}

func TestRevisionTemplate(t *testing.T) {
	tmpl := podTemplate([]string{"setup:1"}, "app:v1", "side:2", "app:v1")
	now := mapResolver{"app:v1": pinOf("app:v1", 'a'), "setup:1": pinOf("setup:1", 'c')}
	oldPinned := schema.WithImagePins(tmpl, []schema.ImagePin{pinOf("app:v1", '0')})
	other := podTemplate(nil, "other:1")
	tests := []struct {
		name     string
		stored   []schema.PodTemplateSpec
		resolver ImageResolver
		want     []schema.ImagePin
	}{
		{"new revision: every image the resolver knows, init containers first", nil, now,
			[]schema.ImagePin{pinOf("setup:1", 'c'), pinOf("app:v1", 'a')}},
		{"new revision, nothing known: the template as it is", nil, mapResolver{}, nil},
		{"a pin for another reference is not this image's", nil, mapResolver{"app:v1": pinOf("app:v2", 'a')}, nil},
		{"unchanged template: the stored revision's pins, not what was pushed since",
			[]schema.PodTemplateSpec{oldPinned}, now, []schema.ImagePin{pinOf("app:v1", '0')}},
		{"unchanged template, stored unpinned: stays unpinned", []schema.PodTemplateSpec{tmpl}, now, nil},
		{"undo: an older stored revision of the template, its pins",
			[]schema.PodTemplateSpec{other, oldPinned}, now, []schema.ImagePin{pinOf("app:v1", '0')}},
		{"the first stored revision that matches wins (the current one)",
			[]schema.PodTemplateSpec{oldPinned, schema.WithImagePins(tmpl, []schema.ImagePin{pinOf("app:v1", '9')})}, now,
			[]schema.ImagePin{pinOf("app:v1", '0')}},
		{"another template stored: pinned anew", []schema.PodTemplateSpec{other}, now,
			[]schema.ImagePin{pinOf("setup:1", 'c'), pinOf("app:v1", 'a')}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := revisionTemplate(tmpl, tc.stored, tc.resolver)
			pins, err := schema.ImagePins(got)
			require.NoError(t, err)
			assert.Equal(t, tc.want, pins)
			assert.Equal(t, schema.TemplateHash(tmpl), schema.TemplateHash(schema.WithImagePins(got, nil)),
				"the template is the author's once the pins are left out")
			if tc.want == nil {
				assert.Equal(t, schema.TemplateHash(tmpl), schema.TemplateHash(got), "nothing pinned: the author's hash")
			}
		})
	}
}

// TestRevisionTemplateProperties: over random templates, stored revisions
// and resolvers, the revision's template is the effective one plus pins
// that are valid, of its own images, from the resolver or a stored
// revision; and deciding again over the result keeps it (a re-apply makes
// no new revision), whatever the resolver says then.
func TestRevisionTemplateProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	images := []string{"a:1", "b:2", "registry.example/c:3", "d@" + digestOf('d')}
	pick := func() []string {
		var out []string
		for range 1 + rng.IntN(3) {
			out = append(out, images[rng.IntN(len(images))])
		}
		return out
	}
	resolver := func() mapResolver {
		r := mapResolver{}
		for _, im := range images {
			if rng.IntN(2) == 0 {
				r[im] = pinOf(im, byte('0'+rng.IntN(10)))
			}
		}
		return r
	}
	for i := range 500 {
		tmpl := podTemplate(pick()[:rng.IntN(2)], pick()...)
		var stored []schema.PodTemplateSpec
		for range rng.IntN(3) {
			s := podTemplate(nil, pick()...)
			if rng.IntN(2) == 0 {
				s = tmpl
			}
			stored = append(stored, schema.WithImagePins(s, pinImages(s, resolver())))
		}
		r := resolver()
		got := revisionTemplate(tmpl, stored, r)
		require.Equal(t, schema.TemplateHash(tmpl), schema.TemplateHash(schema.WithImagePins(got, nil)), "case %d", i)
		pins, err := schema.ImagePins(got)
		require.NoError(t, err, "case %d: the pins validate", i)
		fromStored := false
		for _, s := range stored {
			fromStored = fromStored || schema.TemplateHash(s) == schema.TemplateHash(got)
		}
		for _, p := range pins {
			assert.Contains(t, schema.TemplateImages(tmpl), p.Image, "case %d", i)
			if !fromStored {
				assert.Equal(t, r[p.Image], p, "case %d: a new revision's pins are the resolver's", i)
			}
		}
		again := revisionTemplate(tmpl, append([]schema.PodTemplateSpec{got}, stored...), resolver())
		require.Equal(t, schema.TemplateHash(got), schema.TemplateHash(again), "case %d: deciding again keeps the revision", i)
	}
}

func TestWorstCasePinsValidate(t *testing.T) {
	tmpl := podTemplate([]string{"setup:1"}, "app:v1", "side:2")
	pins, err := schema.ImagePins(worstCasePins(tmpl))
	require.NoError(t, err)
	assert.Len(t, pins, 3)
}

// pushArchive pushes a one-layer image tag holding content to the
// controller's store and returns its config digest.
func pushArchive(t *testing.T, tc *testController, tag, content string) string {
	t.Helper()
	a, err := testimage.SaveArchive(tag, []byte(content))
	require.NoError(t, err)
	_, err = tc.api.PushImage(context.Background(), bytes.NewReader(a.Bytes), "")
	require.NoError(t, err)
	return a.Config
}

func pinManifest(image, annotation string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: pinned, namespace: edge}
spec:
  selector: {matchLabels: {app: pinned}}
  template:
    metadata: {labels: {app: pinned}%s}
    spec:
      initContainers:
      - {name: setup, image: "registry.example/unpushed:1"}
      containers:
      - {name: main, image: "%s"}
`, annotation, image)
}

// history returns the daemonset's revisions and the current one.
func history(t *testing.T, tc *testController, key string) ([]api.Revision, api.Revision) {
	t.Helper()
	revs, err := tc.api.RolloutHistory(context.Background(), key)
	require.NoError(t, err)
	for _, r := range revs {
		if r.Current {
			return revs, r
		}
	}
	t.Fatalf("no current revision of %s: %+v", key, revs)
	return nil, api.Revision{}
}

// TestImagesPinnedAtRevisionCreation: a revision pins the images the
// store holds when it is made; a push afterwards changes no revision
// (an unchanged apply keeps it), a restart pins again, an undo returns
// to the old pins, the store keeps the pinned content its tag no longer
// names, and the live daemonset never shows the pins.
func TestImagesPinnedAtRevisionCreation(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	const key = "edge/pinned"
	v1 := pushArchive(t, tc, "collector:1.4", "first")

	// A manifest's own pins are not the controller's: replaced.
	forged := fmt.Sprintf(`, annotations: {%s: '[{"image":"collector:1.4","digest":"%s"}]'}`, schema.ImagePinsAnnotation, digestOf('e'))
	tc.applyYAML(t, pinManifest("collector:1.4", forged))
	revs, cur := history(t, tc, key)
	require.Len(t, revs, 1)
	require.Len(t, cur.Pins, 1, "only the image the store holds is pinned: %+v", cur.Pins)
	assert.Equal(t, "collector:1.4", cur.Pins[0].Image)
	assert.Equal(t, v1, cur.Pins[0].Config)
	list, err := tc.api.ListImages(ctx)
	require.NoError(t, err)
	require.Len(t, list.Images, 1)
	assert.Equal(t, list.Images[0].Digest, cur.Pins[0].Digest, "the manifest digest the store serves")
	first := cur

	// Pushed again with other content: no new revision, even on an
	// unchanged apply.
	v2 := pushArchive(t, tc, "collector:1.4", "second")
	require.NotEqual(t, v1, v2)
	tc.applyYAML(t, pinManifest("collector:1.4", forged))
	revs, cur = history(t, tc, key)
	assert.Len(t, revs, 1, "a push makes no revision")
	assert.Equal(t, first.Hash, cur.Hash)

	// The store keeps the pinned content under its digest name.
	list, err = tc.api.ListImages(ctx)
	require.NoError(t, err)
	var names []string
	for _, im := range list.Images {
		names = append(names, im.Name)
		if strings.Contains(im.Name, "@") {
			assert.Equal(t, first.Pins[0].Digest, im.Digest)
			assert.Equal(t, []string{key}, im.UsedBy)
		}
	}
	assert.ElementsMatch(t, []string{"docker.io/library/collector:1.4", "docker.io/library/collector@" + first.Pins[0].Digest}, names)

	// A restart pins what the store holds now.
	_, err = tc.api.Rollout(ctx, key, api.RolloutRequest{Action: api.RolloutRestart})
	require.NoError(t, err)
	revs, cur = history(t, tc, key)
	require.Len(t, revs, 2)
	require.Len(t, cur.Pins, 1)
	assert.Equal(t, v2, cur.Pins[0].Config, "restart re-pins")

	// Undo returns to revision 1 itself, with its pins.
	_, err = tc.api.Rollout(ctx, key, api.RolloutRequest{Action: api.RolloutUndo, ToRevision: first.Number})
	require.NoError(t, err)
	revs, cur = history(t, tc, key)
	assert.Len(t, revs, 2, "undo makes no new revision")
	assert.Equal(t, first.Hash, cur.Hash)
	assert.Equal(t, first.Pins, cur.Pins)

	ds, err := tc.api.GetDaemonSet(ctx, key)
	require.NoError(t, err)
	assert.NotContains(t, ds.Manifest.Spec.Template.Metadata.Annotations, schema.ImagePinsAnnotation, "the live daemonset shows no pins")
}

// TestUnpinnedFleetKeepsHashes: without images in the store, a revision
// is the effective template as before pinning existed.
func TestUnpinnedFleetKeepsHashes(t *testing.T) {
	tc := startController(t, Config{})
	res := tc.applyYAML(t, pinManifest("collector:1.4", ""))
	require.Len(t, res, 1)
	_, cur := history(t, tc, "edge/pinned")
	assert.Empty(t, cur.Pins)
	ds, err := tc.api.GetDaemonSet(context.Background(), "edge/pinned")
	require.NoError(t, err)
	assert.Equal(t, schema.TemplateHash(effectiveTemplate(&ds.Manifest, nil)), cur.Hash)
}

// TestNodeFetchesPinnedDigest: a node fetches the manifest and blobs of
// the digest its revision pins, also after the tag was pushed again with
// other content; a digest no revision of its desired state pins, and a
// node that does not run the daemonset, are refused.
func TestNodeFetchesPinnedDigest(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	pushArchive(t, tc, "collector:1.4", "first")
	tc.applyYAML(t, pinManifest("collector:1.4", ""))
	_, cur := history(t, tc, "edge/pinned")
	require.Len(t, cur.Pins, 1)
	pin := cur.Pins[0]
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets("edge/pinned")

	pushArchive(t, tc, "collector:1.4", "second") // the tag now names other content
	body, digest, err := tc.NodeImageManifest(ctx, "gw", "collector:1.4", pin.Digest)
	require.NoError(t, err)
	assert.Equal(t, pin.Digest, digest)
	assert.Contains(t, string(body), pin.Config, "the pinned manifest, not the tag's new one")
	f, err := tc.OpenNodeBlob(ctx, "gw", pin.Config)
	require.NoError(t, err, "the pinned config blob")
	require.NoError(t, f.Close())
	_, byName, err := tc.NodeImageManifest(ctx, "gw", "collector:1.4", "")
	require.NoError(t, err)
	assert.NotEqual(t, pin.Digest, byName, "by name: what the tag names now")

	_, _, err = tc.NodeImageManifest(ctx, "gw", "collector:1.4", digestOf('7'))
	require.ErrorIs(t, err, api.ErrForbidden, "a digest no revision pins")
	_, _, err = tc.NodeImageManifest(ctx, "other", "collector:1.4", pin.Digest)
	require.ErrorIs(t, err, api.ErrForbidden, "a node without the daemonset")
	_, _, err = tc.NodeImageManifest(ctx, "gw", "collector:1.4", "sha256:12")
	require.ErrorIs(t, err, api.ErrInvalid)
	_, _, err = tc.NodeImageManifest(ctx, "gw", "collector@"+pin.Digest, "")
	require.NoError(t, err, "a digest reference asks by that digest")
}
