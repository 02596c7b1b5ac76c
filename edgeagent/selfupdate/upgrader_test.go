package selfupdate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// fakeFetcher serves binaries by digest from files, copying them into
// dir as imagefetch does.
type fakeFetcher struct {
	dir string

	mu      sync.Mutex
	files   map[string]string // digest -> source file
	fail    error             // returned by FetchLayer when set
	fetched int
}

var _ Fetcher = (*fakeFetcher)(nil)

func (f *fakeFetcher) FetchLayer(_ context.Context, _, digest string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched++
	if f.fail != nil {
		return "", f.fail
	}
	src, ok := f.files[digest]
	if !ok {
		return "", errors.New("no such layer")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(f.dir, "blobs", digest[len("sha256:"):])
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	return dst, os.WriteFile(dst, b, 0o600)
}

func (f *fakeFetcher) LayerProgress(string) int64 { return 0 }
func (f *fakeFetcher) RemoveLayer(digest string) error {
	return os.RemoveAll(filepath.Join(f.dir, "blobs", digest[len("sha256:"):]))
}

// upgradeTemplate is the template of a revision of the agent's
// daemonset naming bin as this platform's binary of version.
func upgradeTemplate(version string, bin Build, deadline string) schema.PodTemplateSpec {
	p := Platform()
	return schema.PodTemplateSpec{
		Metadata: schema.ObjectMeta{Annotations: map[string]string{
			schema.AnnotationAgentVersion:          version,
			schema.AnnotationAgentDigestPrefix + p: bin.Digest,
			schema.AnnotationAgentTrialDeadline:    deadline,
			schema.AnnotationAgentTrialAttempts:    "2",
		}},
		Spec: schema.PodSpec{Containers: []schema.Container{{Name: p, Image: schema.AgentBinaryImage(version, p, bin.Digest)}}},
	}
}

// fleetNode is one device's agent binary directory and its fetcher.
type fleetNode struct {
	p       Paths
	fetcher *fakeFetcher
	v1, v2  Build
}

func newFleetNode(t *testing.T, v2Version string) *fleetNode {
	p := PathsOf(filepath.Join(t.TempDir(), "bin", "edgeset-agent"))
	n := &fleetNode{p: p, fetcher: &fakeFetcher{dir: p.Downloads, files: map[string]string{}}}
	n.v1 = fakeAgent(t, p.Binary, "v1", RecordFormat)
	src := filepath.Join(t.TempDir(), "v2")
	n.v2 = fakeAgent(t, src, v2Version, RecordFormat)
	n.v2.Version = "v2" // what the revision names, whatever the binary says
	n.fetcher.files[n.v2.Digest] = src
	return n
}

// upgrader is an Upgrader of whatever binary is at n.p.Binary, booted
// as the service manager would start it.
func (n *fleetNode) upgrader(t *testing.T) (*Upgrader, error) {
	boot, err := restart(t, n.p)
	if err != nil {
		return nil, err
	}
	boot.Self.Version = versionAt(t, n.p.Binary) // the scripts stand for builds of other versions
	return New(Options{Boot: boot, Fetcher: n.fetcher, Log: quietLog(), CheckTimeout: 10 * time.Second,
		selfDigest: func() (string, error) { return fileDigest(n.p.Binary) }}), nil
}

// runUntilRestart runs u and waits for it to end, which it does only to
// restart into another binary.
func runUntilRestart(t *testing.T, u *Upgrader) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return u.Run(ctx)
}

func TestUpgradeConfirmed(t *testing.T) {
	n := newFleetNode(t, "v2")
	u, err := n.upgrader(t)
	require.NoError(t, err)
	tmpl := upgradeTemplate("v2", n.v2, "1m")
	st := u.SyncSelf("rev2", tmpl, func() {})
	assert.Equal(t, schema.PhasePending, st.Phase)
	assert.False(t, st.Ready)
	require.ErrorIs(t, runUntilRestart(t, u), ErrRestart)
	assert.Equal(t, "v2", versionAt(t, n.p.Binary))

	u, err = n.upgrader(t)
	require.NoError(t, err)
	st = u.SyncSelf("rev2", tmpl, func() {})
	assert.Equal(t, schema.PhasePending, st.Phase, "on trial until connected: %s", st.Message)
	u.Connected()
	assert.False(t, exists(n.p.Record), "confirmed: the record is gone")
	st = u.SyncSelf("rev2", tmpl, func() {})
	assert.Equal(t, edgeagent.SelfStatus{Phase: schema.PhaseRunning, Ready: true, Message: "agent v2"}, st)
}

func TestUpgradeNotConfirmedRollsBack(t *testing.T) {
	n := newFleetNode(t, "v2")
	u, err := n.upgrader(t)
	require.NoError(t, err)
	tmpl := upgradeTemplate("v2", n.v2, "5s")
	u.SyncSelf("rev2", tmpl, func() {})
	require.ErrorIs(t, runUntilRestart(t, u), ErrRestart)

	u, err = n.upgrader(t)
	require.NoError(t, err)
	u.SyncSelf("rev2", tmpl, func() {})
	require.ErrorIs(t, runUntilRestart(t, u), ErrRestart, "no Connected within the deadline")
	assert.Equal(t, "v1", versionAt(t, n.p.Binary))

	u, err = n.upgrader(t)
	require.NoError(t, err)
	st := u.SyncSelf("rev2", tmpl, func() {})
	assert.Equal(t, schema.PhaseFailed, st.Phase)
	assert.Contains(t, st.Message, "agent v2 was rolled back to v1: agent v2 did not connect and receive its desired state within 5s")
	fetched := n.fetcher.fetched
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.NoError(t, u.Run(ctx), "the rejected revision is not tried again")
	assert.Equal(t, fetched, n.fetcher.fetched)

	st = u.SyncSelf("rev3", tmpl, func() {})
	assert.Equal(t, schema.PhasePending, st.Phase, "a new revision (rollout restart) tries the binary again")
}

func TestUpgradeCheckRefusesWrongVersion(t *testing.T) {
	n := newFleetNode(t, "v2-other") // the binary says v2-other, the revision v2
	u, err := n.upgrader(t)
	require.NoError(t, err)
	tmpl := upgradeTemplate("v2", n.v2, "1m")
	poked := make(chan struct{}, 1)
	poke := func() {
		select {
		case poked <- struct{}{}:
		default:
		}
	}
	u.SyncSelf("rev2", tmpl, poke)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	var st edgeagent.SelfStatus
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		st = u.SyncSelf("rev2", tmpl, poke)
		if st.Phase != schema.PhaseFailed {
			return errors.New(st.Phase + ": " + st.Message)
		}
		return nil
	})
	cancel()
	require.NoError(t, <-done)
	select {
	case <-poked:
	default:
		t.Error("the agent was not asked for a pass to report the failure")
	}
	assert.Contains(t, st.Message, "the new binary failed its check: it is agent v2-other, the revision names v2")
	assert.Equal(t, "v1", versionAt(t, n.p.Binary), "nothing was swapped")
	assert.False(t, exists(n.p.Record))
}

func TestUpgradeStatuses(t *testing.T) {
	n := newFleetNode(t, "v2")
	u, err := n.upgrader(t)
	require.NoError(t, err)
	noop := func() {}

	st := u.SyncSelf("rev1", schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: schema.AgentBaselineContainer, Image: schema.AgentBaselineImage}}}}, noop)
	assert.Equal(t, schema.PhaseRunning, st.Phase, "the baseline keeps what runs")
	assert.True(t, st.Ready)

	current := upgradeTemplate("v1", n.v1, "1m")
	st = u.SyncSelf("rev1b", current, noop)
	assert.Equal(t, edgeagent.SelfStatus{Phase: schema.PhaseRunning, Ready: true, Message: "agent v1"}, st, "the binary that runs is the one named")

	other := upgradeTemplate("v2", n.v2, "1m")
	other.Spec.Containers[0].Name = "linux-riscv64"
	other.Metadata.Annotations = map[string]string{schema.AnnotationAgentVersion: "v2", schema.AnnotationAgentDigestPrefix + "linux-riscv64": n.v2.Digest}
	st = u.SyncSelf("rev9", other, noop)
	assert.Equal(t, schema.PhaseRefused, st.Phase)
	assert.Contains(t, st.Message, "agent v2 has no binary for "+schema.DisplayAgentPlatform(Platform())+" (only for linux/riscv64)")

	noFetch := New(Options{Boot: Boot{Paths: n.p, Self: Build{Version: "v1"}}, Log: quietLog(),
		selfDigest: func() (string, error) { return fileDigest(n.p.Binary) }})
	st = noFetch.SyncSelf("rev2", upgradeTemplate("v2", n.v2, "1m"), noop)
	assert.Equal(t, schema.PhaseRefused, st.Phase)
	assert.Contains(t, st.Message, "set image-url")
}

func TestUpgradeDownloadRetried(t *testing.T) {
	n := newFleetNode(t, "v2")
	n.fetcher.fail = errors.New("connection reset")
	u, err := n.upgrader(t)
	require.NoError(t, err)
	tmpl := upgradeTemplate("v2", n.v2, "1m")
	u.SyncSelf("rev2", tmpl, func() {})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st := u.SyncSelf("rev2", tmpl, func() {}); st.Phase != schema.PhaseErrImagePull {
			return errors.New(st.Phase + ": " + st.Message)
		}
		return nil
	})
	st := u.SyncSelf("rev2", tmpl, func() {})
	assert.Contains(t, st.Message, "download of agent v2 failed (retrying in 10s): connection reset")
	u.SyncSelf("", schema.PodTemplateSpec{}, func() {}) // the revision is no longer desired
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, "v1", versionAt(t, n.p.Binary))
}

func TestUpgradeRefusesUnwritableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only directory")
	}
	n := newFleetNode(t, "v2")
	dir := filepath.Dir(n.p.Binary)
	require.NoError(t, os.Chmod(dir, 0o500))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	u, err := n.upgrader(t)
	require.NoError(t, err)
	tmpl := upgradeTemplate("v2", n.v2, "1m")
	u.SyncSelf("rev2", tmpl, func() {})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st := u.SyncSelf("rev2", tmpl, func() {}); st.Phase != schema.PhaseFailed {
			return errors.New(st.Phase + ": " + st.Message)
		}
		return nil
	})
	cancel()
	require.NoError(t, <-done)
	assert.Contains(t, u.SyncSelf("rev2", tmpl, func() {}).Message, "is not writable by the agent")
}
