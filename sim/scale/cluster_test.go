package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/natstest"
)

// The broker-cluster benchmark's gate, fleet size, device processes and
// the extra flags of every device process.
const (
	envClusterGate      = "EDGESET_SCALE_CLUSTER"
	envClusterNodes     = "EDGESET_SCALE_CLUSTER_NODES"
	envClusterProcesses = "EDGESET_SCALE_CLUSTER_DEVICE_PROCESSES"
	envClusterSimFlags  = "EDGESET_SCALE_CLUSTER_SIM_FLAGS"
	envClusterRamp      = "EDGESET_SCALE_CLUSTER_RAMP"
	envClusterQoS       = "EDGESET_SCALE_CLUSTER_SUBSCRIBE_QOS"
	envClusterPubQoS    = "EDGESET_SCALE_CLUSTER_PUBLISH_QOS"
)

// defaultClusterRamp is the devices started per second: each
// registration costs the cluster about ten replicated JetStream writes
// and an auth callout, and a ramp of 2,000 a second overran it at 5,000
// devices here (logins refused at the callout's 5 s timeout, read loops
// blocked on retained stores: docs/benchmarks.md).
const defaultClusterRamp = 250

// devicesPerProcess keeps every device process under the 20,000 files
// one process may hold here.
const devicesPerProcess = 15000

// TestScaleCluster is the fleet scale benchmark on a broker cluster
// (make bench-scale-cluster; EDGESET_SCALE_CLUSTER=1): three nats-server
// processes built from the module, the controller host against all
// three and serving their auth callout, and the devices (in this process
// up to 15,000, in several processes beyond) spread evenly over the
// members. It logs the phases' figures with the members' CPU time, and
// each member's peak RSS and connections; it asserts only that every
// phase completes.
func TestScaleCluster(t *testing.T) {
	if os.Getenv(envClusterGate) != "1" {
		t.Skip("set " + envClusterGate + "=1 to run the fleet scale benchmark on a three-member NATS cluster (make bench-scale-cluster)")
	}
	nodes := positiveEnv(t, envClusterNodes, 50000)
	procs := positiveEnv(t, envClusterProcesses, (nodes+devicesPerProcess-1)/devicesPerProcess)
	if err := RaiseFDLimit(); err != nil { // the members inherit it
		t.Fatal(err)
	}
	bins := t.TempDir()
	natsBin, err := natstest.BuildServer(bins)
	if err != nil {
		t.Fatal(err)
	}
	simBin := filepath.Join(bins, "edgeset-sim")
	if out, err := goBuild(simBin, "github.com/edgeset/edgeset/cmd/edgeset-sim"); err != nil {
		t.Fatalf("go build edgeset-sim: %v\n%s", err, out)
	}
	cluster := natstest.StartProcs(t, natsBin, 3)
	t.Logf("cluster: %d members, MQTT %s", len(cluster.Procs), strings.Join(cluster.MQTTURLs(), " "))
	for i, p := range cluster.Procs {
		if u := p.ProfURL(); u != "" {
			t.Logf("member s%d (pid %d) profiles: %s", i, p.PID(), u)
		}
	}

	dir := t.TempDir()
	if _, err := credential.LoadOrCreateFleetSecret(dir); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	seed, err := cluster.Issuer.Seed()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envHostBroker, strings.Join(cluster.MQTTURLs(), ","))
	t.Setenv(envHostNATSAuthURLs, strings.Join(cluster.Clients, ","))
	t.Setenv(envHostNATSAuthPWFile, writeFile(t, files, "auth.password", cluster.AuthPassword))
	t.Setenv(envHostNATSAuthSeed, writeFile(t, files, "issuer.seed", string(seed)))

	ramp := float64(positiveEnv(t, envClusterRamp, defaultClusterRamp))
	base := watchMembers(t, cluster)() // the members before any device
	peaks := watchMembers(t, cluster)
	cpuBefore := membersCPU(t, cluster)
	// Devices subscribe and publish at QoS 0, as docs/scale-out.md
	// recommends on NATS (a QoS 1 subscription is a replicated JetStream
	// consumer each, a QoS 1 publish a replicated store), in this process
	// as in device processes; 1 measures the other choice.
	subQoS, pubQoS := qosEnv(t, envClusterQoS), qosEnv(t, envClusterPubQoS)
	device := append([]string{simBin, "--bench-devices", "--log-level", "warn"}, strings.Fields(os.Getenv(envClusterSimFlags))...)
	res, err := Run(context.Background(), Options{
		Nodes: nodes, Ramp: ramp, HostCommand: []string{os.Args[0], "-test.run=^$"}, DataDir: dir,
		BrokerURL: strings.Join(cluster.MQTTURLs(), ","), DeviceProcesses: procs, DeviceCommand: device,
		DeviceBrokers: cluster.MQTTURLs(), SubscribeAtMostOnce: subQoS == 0, PublishAtMostOnce: pubQoS == 0, BrokerPIDs: pids(cluster), Timeout: time.Duration(positiveEnv(t, "EDGESET_SCALE_CLUSTER_PHASE_TIMEOUT_SECONDS", 600)) * time.Second, Progress: testWriter{t},
	})
	peak := peaks()
	cpuAfter := membersCPU(t, cluster)
	if err != nil {
		t.Fatalf("benchmark: %v", err)
	}
	t.Logf("nodes %d in %d device processes, subscribing at QoS %d, publishing at QoS %d (ramp %.2fs, connect p50 %.3fs p99 %.3fs max %.3fs)",
		res.Nodes, procs, subQoS, pubQoS, res.RampSeconds, res.Fleet.ConnectSeconds.P50, res.Fleet.ConnectSeconds.P99, res.Fleet.ConnectSeconds.Max)
	t.Logf("registered after ramp   %.2fs", res.RegisterSeconds)
	t.Logf("apply -> all running    %.2fs", res.ApplySeconds)
	t.Logf("rollout (maxUnav. 10%%)  %.2fs", res.RolloutSeconds)
	t.Logf("controller live heap    %.2f KiB per node; RSS %.2f KiB per node", res.HeapPerNode()/1024, res.RSSPerNode()/1024)
	t.Logf("rollout MQTT bytes/node %.0f", res.RolloutBytesPerNode)
	for i, m := range peak {
		held := max(m.connections, 1)
		t.Logf("broker member s%d RSS %.1f MiB before the devices, peak %.1f MiB: %.1f KiB per device it holds (%d connections at most), %.1f KiB per device of the fleet; CPU %.1fs during the run",
			i, float64(base[i].rss)/(1<<20), float64(m.rss)/(1<<20), float64(m.rss-min(m.rss, base[i].rss))/1024/float64(held), m.connections,
			float64(m.rss-min(m.rss, base[i].rss))/1024/float64(nodes), cpuAfter[i].Sub(cpuBefore[i]).Total())
	}
	t.Log(res.RegisterCPU.Line("register"))
	t.Log(res.ApplyCPU.Line("apply"))
	t.Log(res.RolloutCPU.Line("rollout"))
	logJetStream(t, cluster, nodes)
}

// logJetStream logs what the run cost JetStream: the messages stored in
// each MQTT stream (its last sequence, replicated to every member) per
// device, as the first member reports them, and each member's
// JetStream API requests and errors.
func logJetStream(t *testing.T, c *natstest.Procs, nodes int) {
	for i, p := range c.Procs {
		var jsz struct {
			Storage uint64 `json:"storage"`
			API     struct {
				Total  uint64 `json:"total"`
				Errors uint64 `json:"errors"`
			} `json:"api"`
			Accounts []struct {
				Streams []struct {
					Name  string `json:"name"`
					State struct {
						LastSeq uint64 `json:"last_seq"`
					} `json:"state"`
					Cluster struct {
						Leader string `json:"leader"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		if err := getJSON(p.Monitor("/jsz?accounts=true&streams=true"), &jsz); err != nil {
			t.Logf("member s%d: %v", i, err)
			continue
		}
		var streams []string
		for _, a := range jsz.Accounts {
			for _, st := range a.Streams {
				streams = append(streams, fmt.Sprintf("%s %d (%.2f per device, leader %s)", st.Name, st.State.LastSeq,
					float64(st.State.LastSeq)/float64(nodes), st.Cluster.Leader))
			}
		}
		sort.Strings(streams)
		t.Logf("member s%d: JetStream file storage %.1f MiB, API %d requests, %d errors; streams it hosts: %s", i, float64(jsz.Storage)/(1<<20),
			jsz.API.Total, jsz.API.Errors, strings.Join(streams, ", "))
	}
}

// getJSON decodes the JSON document at url into v.
func getJSON(url string, v any) error {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// membersCPU reads every member's CPU time so far.
func membersCPU(t *testing.T, c *natstest.Procs) []CPUTime {
	out := make([]CPUTime, len(c.Procs))
	for i, p := range c.Procs {
		var err error
		if out[i], err = ProcessCPU(p.PID()); err != nil {
			t.Fatalf("member s%d: %v", i, err)
		}
	}
	return out
}

// pids are the members' processes.
func pids(c *natstest.Procs) []int {
	out := make([]int, len(c.Procs))
	for i, p := range c.Procs {
		out[i] = p.PID()
	}
	return out
}

// qosEnv reads a QoS, 0 or 1, from name: 0 when unset.
func qosEnv(t *testing.T, name string) int {
	switch s := os.Getenv(name); s {
	case "", "0":
		return 0
	case "1":
		return 1
	default:
		t.Fatalf("%s=%q: want 0 or 1", name, s)
		return 0
	}
}

// positiveEnv reads a positive integer from name, def when unset.
func positiveEnv(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

func writeFile(t *testing.T, dir, name, content string) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// memberPeak is the most a member held while watched: RSS in bytes and
// client connections (/varz).
type memberPeak struct {
	rss         uint64
	connections int
}

// watchMembers samples every member's RSS and connections each second
// until the returned function is called, which returns each member's
// peaks (at once: their figures now).
func watchMembers(t *testing.T, c *natstest.Procs) func() []memberPeak {
	peaks := make([]memberPeak, len(c.Procs))
	var mu sync.Mutex // guards peaks
	sample := func() {
		for i, p := range c.Procs {
			rss, rerr := p.RSS()
			conns, cerr := connections(p)
			mu.Lock()
			if rerr == nil {
				peaks[i].rss = max(peaks[i].rss, rss)
			}
			if cerr == nil {
				peaks[i].connections = max(peaks[i].connections, conns)
			}
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	var once sync.Once
	finish := func() []memberPeak {
		once.Do(func() {
			close(stop)
			<-done
		})
		sample()
		mu.Lock()
		defer mu.Unlock()
		return append([]memberPeak(nil), peaks...)
	}
	t.Cleanup(func() { finish() })
	return finish
}

// connections is the member's client connection count (/varz), MQTT
// clients included.
func connections(p *natstest.Proc) (int, error) {
	var v struct {
		Connections int `json:"connections"`
	}
	err := getJSON(p.Monitor("/varz"), &v)
	return v.Connections, err
}

// goBuild builds pkg into out.
func goBuild(out, pkg string) ([]byte, error) {
	return exec.Command("go", "build", "-o", out, pkg).CombinedOutput()
}
