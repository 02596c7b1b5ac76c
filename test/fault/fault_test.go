package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// grace is the controller's node-offline-grace in every scenario.
const grace = time.Second

// scenario is a converged fleet on exporter:1 with the checker running.
type scenario struct {
	t   *testing.T
	ctl *controllerProc
	f   *fleet
	chk *checker
	v1  string
}

func setup(t *testing.T, opts agentOptions, v1 string) *scenario {
	ctl := startControllerProc(t, grace)
	f := startFleet(t, ctl, fleetSize(t), opts)
	ctl.apply(v1)
	ds := f.converged(func(ds api.DaemonSet) string { return ds.CurrentHash })
	s := &scenario{t: t, ctl: ctl, f: f, v1: ds.CurrentHash}
	s.chk = startChecker(t, f)
	s.chk.forward(s.v1)
	return s
}

// rollTo applies m and returns the new revision's hash, with the checker
// holding the budget and keeping nodes from going back.
func (s *scenario) rollTo(m string, maxUnavailable int, surge bool) string {
	s.t.Helper()
	s.chk.budget(maxUnavailable, surge)
	s.ctl.apply(m)
	var hash string
	checkfor.Eventually(s.t, 45*time.Second, 50*time.Millisecond, func() error {
		ds, err := s.ctl.daemonSet()
		if err != nil {
			return err
		}
		if ds.CurrentHash == s.v1 {
			return fmt.Errorf("still on %s", s.v1)
		}
		hash = ds.CurrentHash
		return nil
	})
	s.chk.forward(hash)
	return hash
}

func is(hash string) func(api.DaemonSet) string { return func(api.DaemonSet) string { return hash } }

// percent is ceil(p% of n), as the controller rounds.
func percent(p, n int) int { return (p*n + 99) / 100 }

// TestFlappingLinks: 20% of the nodes lose and regain their link at random
// throughout a rolling update.
func TestFlappingLinks(t *testing.T) {
	s := setup(t, agentOptions{startLatency: 200 * time.Millisecond}, manifest("exporter:1", "20%", "0", ""))
	n := len(s.f.agents)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range s.f.some(0.2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for {
				select {
				case <-stop:
					a.link.SetDown(false)
					return
				case <-time.After(time.Duration(100+r.IntN(400)) * time.Millisecond):
				}
				a.link.SetDown(!a.link.Down())
			}
		}()
	}
	v2 := s.rollTo(manifest("exporter:2", "20%", "0", ""), percent(20, n), false)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	s.f.converged(is(v2))
}

// TestControllerKill9: the controller (and its embedded broker, so this is
// also the broker-restart scenario) is killed with SIGKILL three times
// during a surge rollout and restarted on the same store and ports.
func TestControllerKill9(t *testing.T) {
	s := setup(t, agentOptions{startLatency: 300 * time.Millisecond}, manifest("exporter:1", "0", "20%", ""))
	v2 := s.rollTo(manifest("exporter:2", "0", "20%", ""), 0, true)
	for i := range 3 {
		time.Sleep(700 * time.Millisecond)
		if ds, err := s.ctl.daemonSet(); err == nil && ds.Status.Rollout != nil {
			r := ds.Status.Rollout
			t.Logf("kill %d: %d of %d updated, %d updating, complete %v", i+1, r.Updated, r.Total, r.Updating, r.Complete)
		}
		s.ctl.kill()
		time.Sleep(200 * time.Millisecond)
		s.ctl.start()
	}
	ds, err := s.ctl.daemonSet()
	require.NoError(t, err)
	assert.Equal(t, v2, ds.CurrentHash, "the revision survives kill -9")
	s.f.converged(is(v2))
	assert.Equal(t, 3, s.ctl.kills)
}

// TestAgentRestarts: 20% of the agents are killed and restarted on the same
// data directory and runtime, twice, during a rolling update: each adopts
// its containers instead of starting duplicates.
func TestAgentRestarts(t *testing.T) {
	s := setup(t, agentOptions{startLatency: 200 * time.Millisecond}, manifest("exporter:1", "20%", "0", ""))
	n := len(s.f.agents)
	v2 := s.rollTo(manifest("exporter:2", "20%", "0", ""), percent(20, n), false)
	victims := s.f.some(0.2)
	for range 2 {
		time.Sleep(500 * time.Millisecond)
		var wg sync.WaitGroup
		for _, a := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.f.killAgent(a)
				time.Sleep(200 * time.Millisecond)
				s.f.startAgent(a)
			}()
		}
		wg.Wait()
	}
	s.f.converged(is(v2))
}

// TestOfflineThroughRollout: a node offline for the whole rollout neither
// stalls it nor escapes it: it is updated once it returns.
func TestOfflineThroughRollout(t *testing.T) {
	s := setup(t, agentOptions{}, manifest("exporter:1", "20%", "0", "{offlineGraceSeconds: 1}"))
	n := len(s.f.agents)
	away := s.f.some(0.05)
	for _, a := range away {
		a.link.SetDown(true)
	}
	checkfor.Eventually(t, 45*time.Second, 100*time.Millisecond, func() error {
		for _, a := range away {
			node, err := s.ctl.api.GetNode(context.Background(), a.name)
			if err != nil {
				return err
			}
			if node.Online {
				return fmt.Errorf("%s still online", a.name)
			}
		}
		return nil
	})
	time.Sleep(grace + 200*time.Millisecond)
	v2 := s.rollTo(manifest("exporter:2", "20%", "0", "{offlineGraceSeconds: 1}"), percent(20, n), false)
	checkfor.Eventually(t, s.f.bound(), 100*time.Millisecond, func() error {
		ds, err := s.ctl.daemonSet()
		if err != nil {
			return err
		}
		if r := ds.Status.Rollout; r == nil || r.Updated != n-len(away) || r.Offline != len(away) {
			return fmt.Errorf("want %d updated and %d offline, got %+v", n-len(away), len(away), r)
		}
		return nil
	})
	for _, a := range away {
		assert.Equal(t, []instance{{dsKey, s.v1}}, a.running(), "%s keeps its revision while away", a.name)
		a.link.SetDown(false)
	}
	s.f.converged(is(v2))
}

// TestBadRevisionRollsBack: a crash-looping revision crosses the failure
// threshold and the rollout rolls back to the last good revision. Its
// containers run 150 ms between crashes, so minReadySeconds keeps them from
// ever counting as available (without it the controller takes each brief
// run for availability and may complete the bad rollout: see the report).
func TestBadRevisionRollsBack(t *testing.T) {
	const policy = "{progressDeadlineSeconds: 2, failureThreshold: 1, autoRollback: true}"
	const minReady = "minReadySeconds: 1"
	s := setup(t, agentOptions{crashImage: "exporter:bad"}, manifest("exporter:1", "20%", "0", policy, minReady))
	n := len(s.f.agents)
	bad := s.rollTo(manifest("exporter:bad", "20%", "0", policy, minReady), percent(20, n), false)
	s.chk.forward("") // the rollback moves nodes back on purpose
	var ds api.DaemonSet
	checkfor.Eventually(t, s.f.bound(), 100*time.Millisecond, func() error {
		var err error
		if ds, err = s.ctl.daemonSet(); err != nil {
			return err
		}
		if r := ds.Status.Rollout; r == nil || !r.RolledBack {
			return fmt.Errorf("not rolled back: %+v", r)
		}
		return nil
	})
	assert.Equal(t, s.v1, ds.CurrentHash)
	assert.Equal(t, bad, ds.Status.Rollout.RolledBackFrom)
	s.f.converged(is(s.v1))
}

// TestStaleDeliveries: a client with the controller's identity replays
// desired states of an older generation to some nodes and observed states
// of an older generation for others, during and after a rolling update.
// Agents must ignore the former and the controller the latter.
func TestStaleDeliveries(t *testing.T) {
	s := setup(t, agentOptions{startLatency: 200 * time.Millisecond}, manifest("exporter:1", "20%", "0", ""))
	n := len(s.f.agents)
	rp := startReplayer(t, s.ctl)
	rp.recordFor(t, s.f)

	v2 := s.rollTo(manifest("exporter:2", "20%", "0", ""), percent(20, n), false)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				rp.replay(s.f, 0.3)
			}
		}
	}()
	time.Sleep(3 * time.Second)
	s.f.converged(is(v2))
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	rp.replay(s.f, 1)
	// Nothing may move backwards: the fleet and the status stay converged.
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		ds, err := s.ctl.daemonSet()
		require.NoError(t, err)
		require.NotNil(t, ds.Status.Rollout)
		require.True(t, ds.Status.Rollout.Complete, "rollout status after stale observed states: %+v", ds.Status.Rollout)
		require.Equal(t, n, ds.Status.UpdatedNumberScheduled, "status after stale observed states: %+v", ds.Status)
	}
	s.f.converged(is(v2))
	require.Positive(t, rp.sent)
}

// replayer holds the controller's MQTT identity and the first desired and
// observed state it saw of every node.
type replayer struct {
	client *mqttclient.Client

	mu    sync.Mutex // guards the fields below
	stale map[string][]byte
	sent  int
}

func startReplayer(t *testing.T, ctl *controllerProc) *replayer {
	rp := &replayer{stale: map[string][]byte{}}
	var err error
	rp.client, err = mqttclient.New(mqttclient.Options{
		BrokerURLs: ctl.brokerURLs(), ClientID: "fault-replayer",
		Username: credential.ControllerUsername, Password: credential.ControllerToken(ctl.secret),
		Handler: func(topic string, payload []byte) {
			rp.mu.Lock()
			defer rp.mu.Unlock()
			if _, ok := rp.stale[topic]; !ok && len(payload) > 0 {
				rp.stale[topic] = payload
			}
		},
		FirstConnectJitter: -1,
		Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rp.client.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return rp
}

// recordFor subscribes to the desired and observed topics of every agent,
// one topic at a time (a wildcard subscription delivering every retained
// message at once overflows the broker's per-client queue of
// MaxPendingWrites at 200 nodes), and waits until it holds both states of
// every node. A topic whose retained message has not arrived after 500 ms
// is subscribed again: at 200 nodes a few dozen of 400 subscriptions made
// in a tight loop never delivered their retained message (root cause not
// established; reported with issue 8).
func (rp *replayer) recordFor(t *testing.T, f *fleet) {
	var topics []string
	for _, a := range f.agents {
		topics = append(topics, schema.NodeTopic(a.name, schema.TopicDesired), schema.NodeTopic(a.name, schema.TopicObserved))
	}
	resubscribed := 0
	for round := 0; ; round++ {
		var missing []string
		rp.mu.Lock()
		for _, topic := range topics {
			if rp.stale[topic] == nil {
				missing = append(missing, topic)
			}
		}
		rp.mu.Unlock()
		if len(missing) == 0 {
			break
		}
		require.Less(t, round, 20, "retained states still missing after %d rounds: %v", round, missing)
		if round > 0 {
			resubscribed += len(missing)
		}
		for _, topic := range missing {
			checkfor.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := rp.client.Unsubscribe(ctx, topic); err != nil {
					return err
				}
				return rp.client.Subscribe(ctx, mqttclient.Subscription{Filter: topic, QoS: 1})
			})
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("replayer recorded %d retained states (%d subscriptions repeated)", len(topics), resubscribed)
}

// replay republishes (not retained) the recorded desired state of a
// fraction of the nodes and the recorded observed state of as many others.
func (rp *replayer) replay(f *fleet, fraction float64) {
	k := max(1, int(float64(len(f.agents))*fraction))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i, a := range f.agents {
		var topic string
		switch {
		case i < k:
			topic = schema.NodeTopic(a.name, schema.TopicDesired)
		case i >= len(f.agents)-k:
			topic = schema.NodeTopic(a.name, schema.TopicObserved)
		default:
			continue
		}
		rp.mu.Lock()
		payload := rp.stale[topic]
		rp.mu.Unlock()
		if rp.client.Publish(ctx, topic, payload, false) == nil {
			rp.mu.Lock()
			rp.sent++
			rp.mu.Unlock()
		}
	}
}
