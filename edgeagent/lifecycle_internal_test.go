package edgeagent

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/schema"
)

func podWith(hostNetwork bool, inits []string, mains int) schema.PodSpec {
	p := schema.PodSpec{HostNetwork: hostNetwork}
	for _, kind := range inits {
		c := schema.Container{Name: kind}
		if kind == "sidecar" {
			rp := schema.RestartPolicyAlways
			c.RestartPolicy = &rp
		}
		p.InitContainers = append(p.InitContainers, c)
	}
	for range mains {
		p.Containers = append(p.Containers, schema.Container{Name: "main"})
	}
	return p
}

func TestNetworkOwnerAndJoins(t *testing.T) {
	tests := []struct {
		name   string
		pod    schema.PodSpec
		owner  slot
		shared bool
		joins  []slot // every other slot joins nothing
	}{
		{"one container", podWith(false, nil, 1), mainSlot(0), true, nil},
		{"main 0 owns", podWith(false, nil, 3), mainSlot(0), true, []slot{mainSlot(1), mainSlot(2)}},
		{"init before main 0 has its own", podWith(false, []string{"init"}, 2), mainSlot(0), true, []slot{mainSlot(1)}},
		{"first sidecar owns", podWith(false, []string{"init", "sidecar", "init", "sidecar"}, 2), initSlot(1), true,
			[]slot{initSlot(2), initSlot(3), mainSlot(0), mainSlot(1)}},
		{"host network shares nothing", podWith(true, []string{"sidecar"}, 2), slot{}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			owner, shared := networkOwner(tc.pod)
			assert.Equal(t, tc.shared, shared)
			assert.Equal(t, tc.owner, owner)
			var joins []slot
			for i := range tc.pod.InitContainers {
				if joinsNetwork(tc.pod, initSlot(i)) {
					joins = append(joins, initSlot(i))
				}
			}
			for i := range tc.pod.Containers {
				if joinsNetwork(tc.pod, mainSlot(i)) {
					joins = append(joins, mainSlot(i))
				}
			}
			assert.Equal(t, tc.joins, joins)
		})
	}
}

func TestHookHost(t *testing.T) {
	pod := podWith(false, []string{"sidecar"}, 2)
	g := containerGroup{initSlot(0): {IPAddress: "10.0.0.5"}, mainSlot(0): {}}
	assert.Equal(t, "10.0.0.5", hookHost(pod, g, mainSlot(0), g[mainSlot(0)]), "a follower is reached at the owner's address")
	assert.Equal(t, "10.0.0.5", hookHost(pod, g, initSlot(0), g[initSlot(0)]))
	assert.Equal(t, "127.0.0.1", hookHost(podWith(true, nil, 1), g, mainSlot(0), ContainerState{IPAddress: "10.0.0.9"}))
	assert.Equal(t, "10.0.0.7", hookHost(podWith(false, []string{"init"}, 1), containerGroup{}, initSlot(0), ContainerState{IPAddress: "10.0.0.7"}))
	assert.Equal(t, "127.0.0.1", hookHost(pod, containerGroup{}, mainSlot(1), ContainerState{}), "owner gone: loopback")
}

func TestDescribeExit(t *testing.T) {
	tests := []struct {
		name           string
		regularInit    bool
		state          ContainerState
		term           string
		summary, event string
	}{
		{"main exit code", false, ContainerState{ExitCode: 1}, "", "exit code 1", "container app exited with code 1"},
		{"main with message", false, ContainerState{ExitCode: 2}, "bad config", "exit code 2: bad config", "container app exited with code 2: bad config"},
		{"main OOMKilled", false, ContainerState{ExitCode: 137, OOMKilled: true}, "", "OOMKilled: exit code 137", "container app was OOMKilled (exit code 137)"},
		{"init", true, ContainerState{ExitCode: 1}, "", `init container "app" exited with code 1`, `init container "app" exited with code 1`},
		{"init with message", true, ContainerState{ExitCode: 1}, "no db", `init container "app" exited with code 1: no db`, `init container "app" exited with code 1: no db`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			summary, event := describeExit(tc.regularInit, "app", tc.state, tc.term)
			assert.Equal(t, tc.summary, summary)
			assert.Equal(t, tc.event, event)
		})
	}
	long := string(make([]byte, 3000))
	summary, event := describeExit(false, "app", ContainerState{ExitCode: 1}, long)
	assert.Len(t, summary, len("exit code 1: ")+maxStatusMessage+len("..."), "the status carries a bounded message")
	assert.Len(t, event, len("container app exited with code 1: ")+3000)
}

func TestLastAndFirstBytes(t *testing.T) {
	assert.Equal(t, "abc", lastBytes("abc", 5))
	assert.Equal(t, "bc", lastBytes("abc", 2))
	assert.Equal(t, "b", lastBytes("éb", 2), "never starts inside a rune")
	assert.Equal(t, "abc", firstBytes("abc", 3))
	assert.Equal(t, "ab...", firstBytes("abc", 2))
	assert.Equal(t, "a...", firstBytes("aé", 2), "never ends inside a rune")
}

func TestStartupProbeRecord(t *testing.T) {
	p := testProber()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	target := probeTarget{id: "c1", startedAt: t0}
	pr := withProbeDefaults(schema.Probe{FailureThreshold: 2})
	sk := probeKey{id: "c1", kind: startup}
	p.workers[sk] = probeWorker{startedAt: t0, cancel: func() {}}
	p.started["c1"] = readyState{startedAt: t0}

	assert.False(t, p.record(sk, target, pr, 0, 1, assert.AnError))
	assert.False(t, p.isStarted("c1", t0))
	assert.True(t, p.record(sk, target, pr, 0, 2, assert.AnError), "worker ends at the threshold")
	f := p.takeFailures()
	assert.Contains(t, f["c1"].message, "startup probe failed 2 times")

	assert.True(t, p.record(sk, target, pr, 1, 0, nil), "worker ends on success")
	assert.True(t, p.isStarted("c1", t0))
	assert.False(t, p.isStarted("c1", t0.Add(time.Second)), "started belongs to one run")
	p.retain(map[probeKey]bool{sk: true})
	assert.True(t, p.isStarted("c1", t0), "kept while the container runs")
	p.retain(nil)
	assert.False(t, p.isStarted("c1", t0))
}

func TestPullAuth(t *testing.T) {
	device := &RegistryAuth{Username: "device"}
	own := &RegistryAuth{Username: "from-secret"}
	assert.Same(t, own, pullAuth(ContainerSpec{PullAuth: own}, device), "the template's imagePullSecrets first")
	assert.Same(t, device, pullAuth(ContainerSpec{}, device), "else the device's")
	assert.Nil(t, pullAuth(ContainerSpec{}, nil), "else anonymous")
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		n     int
		limit int
		want  string
	}{
		{"fewer lines than asked", "a\nb\n", 5, 100, "a\nb\n"},
		{"last n", "a\nb\nc\nd\n", 2, 100, "c\nd\n"},
		{"unterminated last line", "a\nb\nc", 2, 100, "b\nc"},
		{"byte limit drops the oldest", "aaaa\nbbbb\ncc\n", 3, 8, "bbbb\ncc\n"},
		{"one long line is kept", "xxxxxxxxxx\n", 3, 4, "xxxxxxxxxx\n"},
		{"empty", "", 3, 100, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := lastLines(strings.NewReader(tc.in), tc.n, tc.limit)
			assert.NoError(t, err)
			b, _ := io.ReadAll(r)
			assert.Equal(t, tc.want, string(b))
		})
	}
}

// execRuntime answers Exec with code; the rest of Runtime is unused.
type execRuntime struct {
	Runtime
	code int
}

func (r execRuntime) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	return r.code, []byte("out"), nil
}

func TestRunHandler(t *testing.T) {
	ctx := context.Background()
	target := probeTarget{id: "c1", host: "127.0.0.1"}
	exec := schema.LifecycleHandler{Exec: &schema.ExecAction{Command: []string{"hook"}}}
	ok := newProber(execRuntime{code: 0}, func() {}, slog.New(slog.DiscardHandler), nil)
	failing := newProber(execRuntime{code: 3}, func() {}, slog.New(slog.DiscardHandler), nil)
	ok.second, failing.second = time.Millisecond, time.Millisecond

	assert.NoError(t, ok.runHandler(ctx, target, exec))
	assert.ErrorContains(t, failing.runHandler(ctx, target, exec), `exec ["hook"] exited with 3: out`)
	assert.NoError(t, ok.runHandler(ctx, target, schema.LifecycleHandler{TCPSocket: &schema.TCPSocketAction{Port: schema.FromInt(1)}}),
		"tcpSocket hooks are deprecated and not run")
	assert.NoError(t, ok.runHandler(ctx, target, schema.LifecycleHandler{Sleep: &schema.SleepAction{Seconds: 2}}))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.NoError(t, ok.runHandler(cancelled, target, schema.LifecycleHandler{Sleep: &schema.SleepAction{Seconds: 1 << 20}}),
		"a sleep ends with its context")
	assert.ErrorContains(t, ok.runHandler(ctx, target, schema.LifecycleHandler{}), "no exec, httpGet or sleep")
}
