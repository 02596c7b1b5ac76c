package edgeagent_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

const plainSecret = "s3cr3t-value"

// secretEnvRevision reads key "key" of Secret api into env KEY.
var secretEnvRevision = testRevision(cfgNS+"/secret-env", testTemplate("busybox:1.36", func(p *schema.PodSpec) {
	p.Containers[0].Env = []schema.EnvVar{
		{Name: "KEY", ValueFrom: &schema.EnvVarSource{SecretKeyRef: &schema.SecretKeySelector{Name: "api", Key: "key"}}},
	}
}))

// secretVolumeRevision mounts Secret api at /etc/secret and reads it into env.
var secretVolumeRevision = testRevision(cfgNS+"/secret-vol", testTemplate("busybox:1.36", func(p *schema.PodSpec) {
	p.Volumes = []schema.Volume{{Name: "creds", Secret: &schema.SecretVolumeSource{SecretName: "api"}}}
	p.Containers[0].VolumeMounts = []schema.VolumeMount{{Name: "creds", MountPath: "/etc/secret"}}
}))

// sealedSecretPayload is what the controller publishes for s on node's
// topic, sealed to pub.
func sealedSecretPayload(t *testing.T, pub sealing.PublicKey, node string, s schema.Secret) (hash string, payload []byte) {
	t.Helper()
	hash = schema.SecretHash(s)
	plain := mustJSON(t, schema.SecretMessage{SchemaVersion: schema.WireVersion, Node: node, Hash: hash, Secret: s})
	box, err := sealing.SealSecret(pub, node, hash, plain)
	require.NoError(t, err)
	return hash, mustJSON(t, schema.SealedSecretMessage{SchemaVersion: schema.WireVersion, Node: node, Hash: hash, Sealed: box})
}

// onDisk lists the files under dir that hold the test secret's value, in
// the clear or in base64, on dir's own filesystem (a tmpfs mounted
// beneath it is memory, not disk).
func onDisk(t *testing.T, dir string) []string {
	t.Helper()
	var root syscall.Stat_t
	require.NoError(t, syscall.Stat(dir, &root))
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Dev != root.Dev {
			return filepath.SkipDir // a tmpfs
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(plainSecret)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(plainSecret)))) {
			found = append(found, p)
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

// rebootOffline stops the agent and starts a new one over a new runtime
// (the device rebooted: no container left) without a broker.
func (h *harness) rebootOffline(cfg edgeagent.Config) *specRecorder {
	h.t.Helper()
	h.stop()
	rebooted := fake.New()
	rebooted.AddImage("busybox:1.36")
	specs := recordSpecs(rebooted)
	h.rt = &countingRuntime{Runtime: rebooted}
	h.conn = newFakeConn()
	h.conn.Err = errors.New("network unreachable")
	h.start(cfg)
	return specs
}

// TestSealedSecretOpensAndStaysSealedAtRest: a Secret sealed to the
// node's key is opened and used; the data dir holds it only sealed (the
// key file beside it, mode 0600), and an offline reboot opens it again.
// A box sealed to another key or for another node is not taken.
func TestSealedSecretOpensAndStaysSealedAtRest(t *testing.T) {
	h := newHarness(t)
	specs := recordSpecs(h.rt.Runtime)
	h.start(h.config())
	h.connect()
	rev, s := secretEnvRevision, testSecret()
	hash := schema.SecretHash(s)
	h.sendDesiredWith(1, nil, []schema.ObjectRef{ref("api", hash)}, want(rev))
	h.sendRevision(rev)
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhasePending))

	other, err := sealing.GenerateKey()
	require.NoError(t, err)
	topic := schema.NodeSecretTopic(testNode, hash)
	_, forOtherKey := sealedSecretPayload(t, other.Public(), testNode, s)
	h.agent.HandleMessage(topic, forOtherKey)
	_, forOtherNode := sealedSecretPayload(t, h.agent.PublicKey(), "gw-2", s)
	h.agent.HandleMessage(topic, forOtherNode)
	h.waitPasses(3)
	h.waitInstance(rev.DaemonSet, rev.Hash, phaseIs(schema.PhasePending))

	_, payload := sealedSecretPayload(t, h.agent.PublicKey(), testNode, s)
	h.agent.HandleMessage(topic, payload)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	name := edgeagent.ContainerName(testNode, rev.DaemonSet, rev.Hash, "main")
	spec, ok := specs.get(name)
	require.True(t, ok)
	assert.Equal(t, []string{"KEY=" + plainSecret}, spec.Env)

	specs = h.rebootOffline(h.config())
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	spec, ok = specs.get(name)
	require.True(t, ok, "restored from the sealed copy in agent.db")
	assert.Equal(t, []string{"KEY=" + plainSecret}, spec.Env)
	h.stop()

	assert.Empty(t, onDisk(t, h.dir), "the data dir holds the secret only sealed")
	fi, err := os.Stat(filepath.Join(h.dir, sealing.KeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestPlainSecretKeptSealed: a Secret that arrives in the clear (an older
// controller, or unsealed-secrets-fallback) is kept sealed to the node's
// own key; an agent.db an older agent wrote, with the Secret in the
// clear, is sealed in place at start.
func TestPlainSecretKeptSealed(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	rev, s := secretEnvRevision, testSecret()
	h.sendDesiredWith(1, nil, []schema.ObjectRef{ref("api", schema.SecretHash(s))}, want(rev))
	h.sendRevision(rev)
	h.sendSecretFor(testNode, s)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	h.stop()
	assert.Empty(t, onDisk(t, h.dir))
}

// TestSecretsInMemory: with SecretsAtRest memory nothing of a Secret
// reaches the disk: not agent.db, and its volume is a tmpfs. After a
// reboot the instance waits for the controller's message.
func TestSecretsInMemory(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs for secret volumes needs Linux and root")
	}
	h := newHarness(t)
	cfg := h.config()
	cfg.SecretsAtRest = edgeagent.SecretsInMemory
	h.start(cfg)
	h.connect()
	s := testSecret()
	hash, payload := sealedSecretPayload(t, h.agent.PublicKey(), testNode, s)
	refs := []schema.ObjectRef{ref("api", hash)}
	h.sendDesiredWith(1, nil, refs, want(secretEnvRevision), want(secretVolumeRevision))
	h.sendRevision(secretEnvRevision)
	h.sendRevision(secretVolumeRevision)
	h.agent.HandleMessage(schema.NodeSecretTopic(testNode, hash), payload)
	h.waitInstance(secretEnvRevision.DaemonSet, secretEnvRevision.Hash, runningReady)
	h.waitInstance(secretVolumeRevision.DaemonSet, secretVolumeRevision.Hash, runningReady)

	uid := edgeagent.PodUID(testNode, secretVolumeRevision.DaemonSet, secretVolumeRevision.Hash)
	vol := filepath.Join(h.dir, "pods", uid, "volumes", "kubernetes.io~secret", "creds")
	b, err := os.ReadFile(filepath.Join(vol, "key"))
	require.NoError(t, err)
	assert.Equal(t, plainSecret, string(b), "the container sees the file")
	var st, parent syscall.Stat_t
	require.NoError(t, syscall.Stat(vol, &st))
	require.NoError(t, syscall.Stat(filepath.Dir(vol), &parent))
	assert.NotEqual(t, parent.Dev, st.Dev, "the secret volume is a tmpfs")
	assert.Empty(t, onDisk(t, h.dir), "nothing of the secret on disk")

	rebooted := h.rebootOffline(cfg)
	h.waitInstance(secretEnvRevision.DaemonSet, secretEnvRevision.Hash, phaseIs(schema.PhasePending))
	_, ok := rebooted.get(edgeagent.ContainerName(testNode, secretEnvRevision.DaemonSet, secretEnvRevision.Hash, "main"))
	assert.False(t, ok, "no secret kept: the instance waits for the controller")
	h.agent.HandleMessage(schema.NodeSecretTopic(testNode, hash), payload)
	h.waitInstance(secretEnvRevision.DaemonSet, secretEnvRevision.Hash, runningReady)

	// Removing the instance unmounts its tmpfs.
	h.sendDesiredWith(2, nil, refs, want(secretEnvRevision))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if _, err := os.Stat(vol); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("volume %s still there (%v)", vol, err)
		}
		return nil
	})
	h.stop()
	assert.Empty(t, onDisk(t, h.dir))
}

// registrar is a controller's key registration as the agent sees it: it
// takes a first key, and another only with the proof of the registered
// one (as controller.RegisterNodeKey).
type registrar struct {
	mu      sync.Mutex
	macKey  []byte
	node    string
	key     sealing.PublicKey
	calls   int
	refused error // returned while set
}

func (r *registrar) RegisterKey(_ context.Context, publicKey string, proof []byte) (*schema.SealedBox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.refused != nil {
		return nil, r.refused
	}
	pub, err := sealing.ParsePublicKey(publicKey)
	if err != nil {
		return nil, err
	}
	switch {
	case r.key.IsZero() || r.key.Equal(pub):
	case proof == nil:
		box, err := sealing.SealChallenge(r.macKey, r.node, r.key, pub, time.Now())
		return &box, err
	default:
		if err := sealing.CheckProof(r.macKey, r.node, r.key, pub, proof, time.Now()); err != nil {
			return nil, err
		}
	}
	r.key = pub
	return nil, nil
}

func (r *registrar) registered() (sealing.PublicKey, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.key, r.calls
}

// TestKeyRotation: the agent registers its key when it runs; a rotation
// (RotateNodeKey, agent stopped) keeps the old key until the controller
// took the new one with the proof of the old, then drops it; the Secret
// kept at rest is resealed to the new key, so it opens offline after.
func TestKeyRotation(t *testing.T) {
	h := newHarness(t)
	reg := &registrar{macKey: []byte("controller key"), node: testNode}
	cfg := h.config()
	cfg.KeyRegistrar = reg
	h.start(cfg)
	h.connect()
	first := h.agent.PublicKey()
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if k, _ := reg.registered(); !k.Equal(first) {
			return errors.New("key not registered")
		}
		return nil
	})
	rev, s := secretEnvRevision, testSecret()
	hash, payload := sealedSecretPayload(t, first, testNode, s)
	h.sendDesiredWith(1, nil, []schema.ObjectRef{ref("api", hash)}, want(rev))
	h.sendRevision(rev)
	h.agent.HandleMessage(schema.NodeSecretTopic(testNode, hash), payload)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	h.stop()

	ring, err := edgeagent.RotateNodeKey(cfg)
	require.NoError(t, err)
	require.Equal(t, first.KeyID(), ring.Previous.KeyID())
	kept, err := sealing.ReadKeyFile(filepath.Join(h.dir, sealing.KeyFile))
	require.NoError(t, err)
	assert.Equal(t, first.KeyID(), kept.Previous.KeyID(), "the old key stays until the new one is registered")

	// The controller cannot be reached at first: the old key stays.
	reg.mu.Lock()
	reg.refused = errors.New("connection refused")
	reg.mu.Unlock()
	specs := h.rebootOffline(cfg)
	h.waitInstance(rev.DaemonSet, rev.Hash, runningReady)
	_, ok := specs.get(edgeagent.ContainerName(testNode, rev.DaemonSet, rev.Hash, "main"))
	assert.True(t, ok, "the kept secret, resealed, opens with the new key")
	kept, err = sealing.ReadKeyFile(filepath.Join(h.dir, sealing.KeyFile))
	require.NoError(t, err)
	require.NotNil(t, kept.Previous)

	reg.mu.Lock()
	reg.refused = nil
	reg.mu.Unlock()
	checkfor.Eventually(t, 15*time.Second, 10*time.Millisecond, func() error {
		k, _ := reg.registered()
		if !k.Equal(ring.Current.Public()) {
			return errors.New("new key not registered")
		}
		kept, err := sealing.ReadKeyFile(filepath.Join(h.dir, sealing.KeyFile))
		if err != nil {
			return err
		}
		if kept.Previous != nil {
			return errors.New("previous key still kept after the new one was registered")
		}
		return nil
	})
	assert.Equal(t, ring.Current.KeyID(), h.agent.PublicKey().KeyID())
}
