package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
	"github.com/edgeset/edgeset/test/testimage"
)

func TestHostileImagePinEmbeddedBroker(t *testing.T) { testHostileImagePin(t, false) }

func TestHostileImagePinMosquitto(t *testing.T) { testHostileImagePin(t, true) }

// testHostileImagePin: with signing on, a revision pins the image the
// controller's store holds; a device whose engine (and registry) holds
// other content under that tag refuses it (Failed, ImageDigestMismatch,
// nothing runs) and runs the genuine content once it has it; an attacker
// who swaps the pin in the signed revision on the broker gets it refused
// (SignatureInvalid), so a device that has not verified the revision yet
// runs nothing.
func testHostileImagePin(t *testing.T, mosquittoBroker bool) {
	const image = "registry.local/exporter:3.0"
	f := startFleet(t, mosquittoBroker)
	f.delegate(1)
	evil := f.startAttacker()
	genuine, err := testimage.SaveArchive(image, []byte("the exporter the operator pushed"))
	require.NoError(t, err)
	_, err = f.api.PushImage(context.Background(), bytes.NewReader(genuine.Bytes), "")
	require.NoError(t, err)
	tampered := "sha256:" + strings.Repeat("e", 64)

	gw1 := f.startAgent("gw-1")
	gw1.rt.SetImage(image, tampered) // same tag, other content
	gw1.rt.SetRegistryImage(image, tampered)
	f.apply(image)

	f.expectInstance("gw-1", func(in api.Instance) error {
		if in.Phase != schema.PhaseFailed || !strings.Contains(in.Message, "image digest mismatch") || !strings.Contains(in.Message, tampered) {
			return fmt.Errorf("instance %s %q, want Failed with an image digest mismatch naming %s", in.Phase, in.Message, tampered)
		}
		return nil
	})
	f.expectNodeEvent("gw-1", "ImageDigestMismatch")
	require.NoError(t, gw1.expectRunning(), "the tampered image never runs")

	// The genuine content in gw-1's engine: it runs (at the next pull
	// attempt, within the first back-off).
	gw1.rt.SetImage(image, genuine.Config)
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error { return gw1.expectRunning(image) })

	// The attacker swaps the pin for its own content in the signed
	// revision, keeping the controller's signature, on the revision's
	// retained topic; a node that has not verified the revision yet
	// refuses it and runs nothing.
	hash := currentRevision(t, evil, "gw-1")
	before := f.refusals("gw-2")["SignatureInvalid"]
	evil.publish(t, schema.RevisionTopic(hash), swappedPin(t, evil.captured(schema.RevisionTopic(hash)), tampered))
	gw2 := f.startAgent("gw-2")
	gw2.rt.SetImage(image, tampered)
	gw2.rt.SetRegistryImage(image, tampered)
	f.expectRefused("gw-2", "SignatureInvalid", before)
	require.NoError(t, gw2.expectRunning(), "gw-2 runs nothing it could not verify")
	require.NoError(t, gw1.expectRunning(image), "gw-1 keeps the revision it verified")
}

// swappedPin is the last captured signed revision with its image pin
// swapped for config (the digests and hash recomputed to match), under
// the original signatures.
func swappedPin(t *testing.T, captured [][]byte, config string) []byte {
	t.Helper()
	require.NotEmpty(t, captured, "the signed revision was captured")
	var env signing.Envelope
	require.NoError(t, json.Unmarshal(captured[len(captured)-1], &env))
	var st signing.Statement
	require.NoError(t, json.Unmarshal(env.Payload, &st))
	var rev schema.Revision
	require.NoError(t, json.Unmarshal(st.Body, &rev))
	pins, err := schema.ImagePins(rev.Template)
	require.NoError(t, err)
	require.Len(t, pins, 1, "the revision pins the pushed image")
	pins[0].Config, pins[0].Digest = config, config
	rev.Template = schema.WithImagePins(rev.Template, pins)
	st.Body = mustJSON(t, rev) // the hash stays the topic's: a template that hashes otherwise is refused too
	env.Payload = mustJSON(t, st)
	return mustJSON(t, env)
}

// expectInstance waits until the controller lists node's instance of the
// hostile manifest's daemonset as ok accepts it.
func (f *fleet) expectInstance(node string, ok func(api.Instance) error) {
	f.t.Helper()
	checkfor.Eventually(f.t, wait, 50*time.Millisecond, func() error {
		insts, err := f.api.ListInstances(context.Background())
		if err != nil {
			return err
		}
		for _, in := range insts {
			if in.Node == node && in.DaemonSet == "monitoring/exporter" {
				return ok(in)
			}
		}
		return fmt.Errorf("no instance on %s yet", node)
	})
}

// expectNodeEvent waits for an event of reason from node.
func (f *fleet) expectNodeEvent(node, reason string) {
	f.t.Helper()
	checkfor.Eventually(f.t, wait, 50*time.Millisecond, func() error {
		evs, err := f.api.Events(context.Background(), api.EventFilter{Object: "node/" + node})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event from %s", reason, node)
	})
}
