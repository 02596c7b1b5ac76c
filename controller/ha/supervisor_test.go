package ha

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/etcdtest"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/sim"
)

// testTTL is the leader lease of the tests' controllers.
const testTTL = 2 * time.Second

const exporterYAML = `apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      containers:
      - {name: exporter, image: "exporter:1"}
`

// testBroker is an external broker (the embedded mochi broker, run on
// its own) and its data directory, which holds the fleet secret.
type testBroker struct {
	url string
	dir string
}

func startBroker(t *testing.T) testBroker {
	dir := t.TempDir()
	b, err := broker.New(broker.Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: cmpLog(testLog("broker")), OnDrop: func(id, topic string) { t.Logf("broker dropped %s to %s", topic, id) }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return testBroker{url: "tcp://" + b.Addr().String(), dir: dir}
}

// supervisorProc is one HA controller run in process.
type supervisorProc struct {
	id, url, dir string
	cancel       context.CancelFunc
	done         chan error
}

func startSupervisor(t *testing.T, id, etcdEndpoint string, b testBroker, dir string) *supervisorProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	cli := etcdtest.NewClient(t, etcdEndpoint)
	sup, err := New(Options{
		Controller: controller.Config{DataDir: dir, BrokerURLs: []string{b.url}, BrokerSettleInterval: -1},
		Client:     cli, Prepare: Replicated(cli, DefaultPrefix, nil),
		ID: id, AdvertiseURL: url, LeaseTTL: testTTL, Listener: ln, Log: testLog(id),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p := &supervisorProc{id: id, url: url, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- sup.Run(ctx) }()
	t.Cleanup(p.stop)
	return p
}

// stop ends the supervisor and waits for Run; safe to call twice.
func (p *supervisorProc) stop() {
	p.cancel()
	if err, ok := <-p.done; ok {
		close(p.done)
		if err != nil && err != context.Canceled {
			panic(fmt.Sprintf("supervisor %s: %v", p.id, err))
		}
	}
}

// role reads the role line of p's /readyz.
func (p *supervisorProc) role() string {
	resp, err := httpGet(p.url + "/readyz")
	if err != nil {
		return err.Error()
	}
	return resp
}

func httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// startDevices runs n simulated devices on b until the test ends.
func startDevices(t *testing.T, b testBroker, n int) {
	secret, err := credential.LoadOrCreateFleetSecret(b.dir)
	require.NoError(t, err)
	f, err := sim.New(sim.Options{BrokerURL: b.url, Nodes: n, Tokens: sim.SecretTokens(secret),
		Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitRoles waits until exactly one of procs leads and the others stand
// by forwarding to it; it returns the leader and the standbys.
func waitRoles(t *testing.T, timeout time.Duration, procs ...*supervisorProc) (*supervisorProc, []*supervisorProc) {
	t.Helper()
	var lead *supervisorProc
	var standbys []*supervisorProc
	checkfor.Eventually(t, timeout, 50*time.Millisecond, func() error {
		lead, standbys = nil, nil
		for _, p := range procs {
			r := p.role()
			switch {
			case strings.HasPrefix(r, "ok\n") && strings.Contains(r, "role: leader"):
				if lead != nil {
					return fmt.Errorf("two leaders: %s and %s", lead.id, p.id)
				}
				lead = p
			case strings.Contains(r, "role: standby ("+p.id+"), forwarding"):
				standbys = append(standbys, p)
			default:
				return fmt.Errorf("%s: %q", p.id, r)
			}
		}
		if lead == nil {
			return fmt.Errorf("no leader")
		}
		for _, s := range standbys {
			if !strings.Contains(s.role(), "forwarding to leader "+lead.id) {
				return fmt.Errorf("%s does not forward to %s yet", s.id, lead.id)
			}
		}
		return nil
	})
	return lead, standbys
}

// TestTwoControllers: two HA controllers on one etcd and an external
// broker. One leads; the other forwards an apply and reads to it, with
// the shared token, which the first created in etcd from its data
// directory's files and the second read. When the leader stops, the
// standby takes over with the store restored from etcd.
func TestTwoControllers(t *testing.T) {
	etcd := etcdtest.Start(t)
	b := startBroker(t)
	dir1, dir2 := t.TempDir(), t.TempDir()
	// The first controller brings the broker's fleet secret (a single-node
	// fleet moving to etcd); the second has none and must read it.
	secret, err := os.ReadFile(filepath.Join(b.dir, credential.SecretFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir1, credential.SecretFile), secret, 0o600))
	c1 := startSupervisor(t, "c1", etcd.Endpoint(), b, dir1)
	lead, _ := waitRoles(t, 20*time.Second, c1)
	require.Equal(t, c1, lead)
	c2 := startSupervisor(t, "c2", etcd.Endpoint(), b, dir2)
	lead, standbys := waitRoles(t, 20*time.Second, c1, c2)
	require.Equal(t, c1, lead)
	standby := standbys[0]

	got, err := os.ReadFile(filepath.Join(dir2, credential.SecretFile))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(secret)), strings.TrimSpace(string(got)), "the standby holds the fleet's secret")
	cli := etcd.Client(t)
	token := string(etcdtest.Get(t, cli, DefaultPrefix+apiTokenKey))
	require.NotEmpty(t, token)
	for _, dir := range []string{dir1, dir2} {
		b, err := os.ReadFile(filepath.Join(dir, "admin.token"))
		require.NoError(t, err)
		assert.Equal(t, token, strings.TrimSpace(string(b)), "admin.token of %s", dir)
	}

	startDevices(t, b, 5)
	resp := get(t, standby.url+"/api/v1/nodes", token)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, lead.id, resp.Header.Get(HeaderServedBy), "the leader answered")
	assert.Equal(t, standby.id, resp.Header.Get(HeaderForwardedBy), "through the standby")
	ctx := context.Background()
	viaStandby := api.NewClient(standby.url, token, nil)
	res, err := viaStandby.Apply(ctx, "exporter.yaml", []byte(exporterYAML), false)
	require.NoError(t, err, "apply through the standby")
	require.NotEmpty(t, res)
	list, err := viaStandby.ListDaemonSets(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "monitoring/exporter", list[0].Namespace+"/"+list[0].Name)
	direct, err := api.NewClient(lead.url, token, nil).GetDaemonSet(ctx, "monitoring/exporter")
	require.NoError(t, err)
	assert.Equal(t, list[0].CurrentHash, direct.CurrentHash, "the standby reads the leader's state")

	start := time.Now()
	lead.stop()
	lead, _ = waitRoles(t, 20*time.Second, standby)
	assert.Equal(t, standby, lead)
	t.Logf("took over %s after the leader stopped", time.Since(start).Round(time.Millisecond))
	after, err := api.NewClient(lead.url, token, nil).GetDaemonSet(ctx, "monitoring/exporter")
	require.NoError(t, err, "the new leader restored the store from etcd")
	assert.Equal(t, list[0].CurrentHash, after.CurrentHash)
	assert.Equal(t, list[0].CreatedAt, after.CreatedAt)
}

func testLog(id string) *slog.Logger {
	if os.Getenv("EDGESET_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("ctl", id)
}

func cmpLog(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// TestSingleNodeMovesToHA: a single-node controller's data directory,
// started as the fleet's first HA controller on an empty etcd, seeds etcd
// with its store and its token: its daemonsets and its API token survive
// the move, and a second controller leading later has them too.
func TestSingleNodeMovesToHA(t *testing.T) {
	etcd := etcdtest.Start(t)
	b := startBroker(t)
	dir := t.TempDir()
	secret, err := os.ReadFile(filepath.Join(b.dir, credential.SecretFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, credential.SecretFile), secret, 0o600))

	single, err := controller.New(controller.Config{DataDir: dir, BrokerURLs: []string{b.url}, BrokerSettleInterval: -1, APIAddr: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- single.Run(ctx) }()
	<-single.Synced()
	oldToken := single.Token()
	_, err = api.NewClient("http://"+single.APIAddr().String(), oldToken, nil).Apply(context.Background(), "exporter.yaml", []byte(exporterYAML), false)
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)

	c1 := startSupervisor(t, "c1", etcd.Endpoint(), b, dir)
	waitRoles(t, 20*time.Second, c1)
	assert.Equal(t, oldToken, string(etcdtest.Get(t, etcd.Client(t), DefaultPrefix+apiTokenKey)), "the single node's token is the fleet's")
	ds, err := api.NewClient(c1.url, oldToken, nil).GetDaemonSet(context.Background(), "monitoring/exporter")
	require.NoError(t, err, "the single node's store seeded etcd")
	c2 := startSupervisor(t, "c2", etcd.Endpoint(), b, t.TempDir())
	c1.stop()
	waitRoles(t, 20*time.Second, c2)
	again, err := api.NewClient(c2.url, oldToken, nil).GetDaemonSet(context.Background(), "monitoring/exporter")
	require.NoError(t, err)
	assert.Equal(t, ds.CurrentHash, again.CurrentHash)
}

// TestThreeControllers: of three, one leads and both others forward to
// it; when it stops, one of the two leads and the last forwards to the
// new leader, with the store restored.
func TestThreeControllers(t *testing.T) {
	etcd := etcdtest.Start(t)
	b := startBroker(t)
	// The fleet's secret is the broker's: put it in etcd, as a founder
	// would, before the three start together.
	secret, err := os.ReadFile(filepath.Join(b.dir, credential.SecretFile))
	require.NoError(t, err)
	_, _, err = ensureSecrets(context.Background(), etcd.Client(t), DefaultPrefix, seededDir(t, secret))
	require.NoError(t, err)
	procs := make([]*supervisorProc, 3)
	for i := range procs {
		procs[i] = startSupervisor(t, fmt.Sprintf("c%d", i+1), etcd.Endpoint(), b, t.TempDir())
	}
	lead, standbys := waitRoles(t, 20*time.Second, procs...)
	require.Len(t, standbys, 2)
	token := string(etcdtest.Get(t, etcd.Client(t), DefaultPrefix+apiTokenKey))
	ctx := context.Background()
	_, err = api.NewClient(standbys[1].url, token, nil).Apply(ctx, "exporter.yaml", []byte(exporterYAML), false)
	require.NoError(t, err)

	lead.stop()
	next, rest := waitRoles(t, 20*time.Second, standbys...)
	require.Len(t, rest, 1)
	t.Logf("%s led, then %s; %s forwards", lead.id, next.id, rest[0].id)
	ds, err := api.NewClient(rest[0].url, token, nil).GetDaemonSet(ctx, "monitoring/exporter")
	require.NoError(t, err, "read through the last standby from the new leader")
	assert.NotEmpty(t, ds.CurrentHash)
}

// seededDir is a data directory holding the fleet secret secret.
func seededDir(t *testing.T, secret []byte) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, credential.SecretFile), secret, 0o600))
	return dir
}
