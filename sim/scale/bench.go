// Package scale is the fleet scale benchmark: a controller host in a
// subprocess (so its memory is its own), N simulated devices in this
// process, and timings taken through the controller's API and metrics.
package scale

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/signing"
	"github.com/edgeset/edgeset/sim"
)

// Options configure one benchmark run.
type Options struct {
	// Nodes is the fleet size; required.
	Nodes int
	// Ramp is devices started per second; zero means 2000.
	Ramp float64
	// HostCommand starts the controller host: a command that runs Host
	// with the data directory appended as its last argument. Required.
	HostCommand []string
	// DataDir is the controller's data directory; empty makes a temporary
	// one, removed afterwards.
	DataDir string
	// CPUProfile, when set, has the controller host write one CPU profile
	// per phase, named after it with the phase before the extension
	// (cpu.pprof: cpu.register.pprof, cpu.apply.pprof, cpu.rollout.pprof;
	// see PhaseProfile), and Result's phases carry their split.
	CPUProfile string
	// DeviceCPUProfile, when set, writes one CPU profile per phase of
	// this process, the simulated devices when they run in it
	// (DeviceProcesses 1), named as CPUProfile's.
	DeviceCPUProfile string
	// BrokerURL, when set, is the broker the devices connect to instead of
	// the host's embedded one: the external broker the host was started
	// against (HostOptions.BrokerURL).
	BrokerURL string
	// DeviceProcesses runs the devices in that many processes of
	// DeviceCommand, each its share of Nodes, instead of in this one (one
	// process may hold 20,000 open files here). Zero or one: this process.
	DeviceProcesses int
	// DeviceCommand starts one device process (RunDevices): edgeset-sim
	// --bench-devices; the share's flags are appended.
	DeviceCommand []string
	// DeviceBrokers, when set, are the brokers the device processes
	// connect to, process k to DeviceBrokers[k modulo their number]: a
	// fleet spread over a broker cluster's nodes. Default: BrokerURL.
	DeviceBrokers []string
	// SubscribeAtMostOnce subscribes every device at QoS 0
	// (sim.Options.SubscribeAtMostOnce; edgeset-sim --subscribe-qos 0 in
	// device processes), wherever the devices run: set it on a NATS
	// cluster, where a QoS 1 subscription is a JetStream consumer each.
	SubscribeAtMostOnce bool
	// PublishAtMostOnce publishes every device's messages at QoS 0
	// (sim.Options.PublishAtMostOnce; --publish-qos 0), wherever the
	// devices run: set it on a NATS cluster, which stores every QoS 1
	// publish in a replicated JetStream stream.
	PublishAtMostOnce bool
	// BrokerPIDs are the external broker's processes (a cluster's
	// members), whose CPU time each phase reports (PhaseCPU.Brokers);
	// they must run through the whole benchmark.
	BrokerPIDs []int
	// Signing: the host signs what it publishes (HostCommand starts it
	// so), and the benchmark makes a fleet root, delegates the host's
	// online key under it, and has every device pin the root and verify
	// each document, as a signing fleet does.
	Signing bool
	// VerifyEach has every device verify every signature itself instead
	// of sharing a cache of verified ones (sim.Options.VerifyEach;
	// edgeset-sim --verify-each in device processes).
	VerifyEach bool
	// SettleWait is how long after the ramp the apply waits at least for
	// every device's second announcement (Result.SettleSeconds); zero
	// means edgeagent.DefaultSettleInterval, negative no wait at all.
	SettleWait time.Duration
	// Timeout bounds each phase; zero means 10 minutes.
	Timeout time.Duration
	// Progress receives one line per phase; nil discards.
	Progress io.Writer
}

// Result are the measured figures of one run.
type Result struct {
	Nodes int `json:"nodes"`
	// RampSeconds is how long launching every device took.
	RampSeconds float64 `json:"rampSeconds"`
	// RegisterSeconds runs from the end of the ramp until the controller
	// counts every node online.
	RegisterSeconds float64 `json:"registerSeconds"`
	// SettleSeconds runs from registration until the fleet is quiet: every
	// device has announced itself again edgeagent.DefaultSettleInterval
	// after it connected (presence, status and observed state, three
	// messages each), so that burst does not land in the apply it would
	// slow down, as no settled fleet's apply meets it.
	SettleSeconds float64 `json:"settleSeconds"`
	// ApplySeconds runs from the apply of a daemonset until numberReady
	// equals Nodes.
	ApplySeconds float64 `json:"applySeconds"`
	// RolloutSeconds runs from the apply of a new image (maxUnavailable
	// 10%) until every node runs it and is available.
	RolloutSeconds float64 `json:"rolloutSeconds"`
	// RolloutBytesPerNode is the controller's MQTT payload bytes published
	// during the rollout, per node (RolloutTraffic.BytesOut over Nodes,
	// kept for the reports that read it).
	RolloutBytesPerNode float64 `json:"rolloutBytesPerNode"`
	// RegisterTraffic, ApplyTraffic and RolloutTraffic are the
	// controller's MQTT messages over each phase, from its own counters.
	RegisterTraffic Traffic `json:"registerTraffic"`
	ApplyTraffic    Traffic `json:"applyTraffic"`
	RolloutTraffic  Traffic `json:"rolloutTraffic"`
	// Heap figures of the controller host after a GC: empty, and with the
	// fleet registered and rolled out.
	HeapBefore HeapInfo `json:"heapBefore"`
	HeapAfter  HeapInfo `json:"heapAfter"`
	// RSS of the controller host, bytes.
	RSSBefore uint64 `json:"rssBefore"`
	RSSAfter  uint64 `json:"rssAfter"`
	// Fleet is the simulator's report.
	Fleet sim.Report `json:"fleet"`
	// CPU time of the controller host and of this process (the simulated
	// agents) per phase. RegisterCPU covers the ramp, registration and
	// the wait for the fleet to settle (SettleSeconds).
	RegisterCPU PhaseCPU `json:"registerCPU"`
	ApplyCPU    PhaseCPU `json:"applyCPU"`
	RolloutCPU  PhaseCPU `json:"rolloutCPU"`
}

// Traffic is the controller's MQTT traffic over a phase: messages
// received from the fleet, and messages and payload bytes published
// (edgeset_mqtt_messages_in_total, _messages_out_total, _bytes_out_total).
type Traffic struct {
	MessagesIn  float64 `json:"messagesIn"`
	MessagesOut float64 `json:"messagesOut"`
	BytesOut    float64 `json:"bytesOut"`
}

// sub is t less an earlier reading.
func (t Traffic) sub(before Traffic) Traffic {
	return Traffic{
		MessagesIn:  t.MessagesIn - before.MessagesIn,
		MessagesOut: t.MessagesOut - before.MessagesOut,
		BytesOut:    t.BytesOut - before.BytesOut,
	}
}

// Line describes t per node of a fleet of nodes.
func (t Traffic) Line(phase string, nodes int) string {
	n := float64(max(nodes, 1))
	return fmt.Sprintf("%s MQTT per node: %.2f messages in, %.2f out, %.0f payload bytes out",
		phase, t.MessagesIn/n, t.MessagesOut/n, t.BytesOut/n)
}

// HeapPerNode is the controller's live heap growth per node.
func (r Result) HeapPerNode() float64 {
	return (float64(r.HeapAfter.LiveBytes) - float64(r.HeapBefore.LiveBytes)) / float64(r.Nodes)
}

// RSSPerNode is the controller's RSS growth per node.
func (r Result) RSSPerNode() float64 {
	return (float64(r.RSSAfter) - float64(r.RSSBefore)) / float64(r.Nodes)
}

// bench is one run in progress.
type bench struct {
	opts Options
	// devicePIDs are the device processes, whose CPU time counts as the
	// simulator's (none when the devices run in this process).
	devicePIDs []int
	host       HostInfo
	// trustRoot is the fleet root the devices pin (Options.Signing).
	trustRoot ed25519.PublicKey
	api       *api.Client
	http      *http.Client
	res       Result
	// rampEnd is when the last device was launched.
	rampEnd time.Time
}

// Run runs the benchmark: start the host, connect the fleet, wait for
// registration, apply a daemonset, roll out a new image, measure.
func Run(ctx context.Context, opts Options) (Result, error) {
	if err := opts.setDefaults(); err != nil {
		return Result{}, err
	}
	if err := RaiseFDLimit(); err != nil {
		return Result{}, err
	}
	if opts.DataDir == "" {
		dir, err := os.MkdirTemp("", "edgeset-bench-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
		opts.DataDir = dir
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	host, wait, err := startHost(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	defer wait()
	b := &bench{opts: opts, host: host, http: &http.Client{Timeout: time.Minute}, res: Result{Nodes: opts.Nodes}}
	b.api = api.NewClient("http://"+host.API, host.Token, b.http)
	if opts.Signing {
		if b.trustRoot, err = delegate(ctx, b.api); err != nil {
			return Result{}, err
		}
	}
	return b.run(ctx)
}

// delegate makes a fleet root, signs a key set of the host's online key
// with it and hands it to the host, as `edgesetctl keys init` and `keys
// delegate` do; it returns the root the devices pin.
func delegate(ctx context.Context, c *api.Client) (ed25519.PublicKey, error) {
	root, err := signing.GenerateKey()
	if err != nil {
		return nil, err
	}
	st, err := c.Signing(ctx)
	if err != nil {
		return nil, fmt.Errorf("signing status: %w", err)
	}
	if !st.Enabled {
		return nil, errors.New("bench: signing asked, but the controller host does not sign")
	}
	pub, err := signing.ParsePublicKey(st.PublicKey)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	env, err := signing.SignKeySet(root, signing.KeySet{Version: 1, IssuedAt: now,
		Keys: []signing.OnlineKey{{ID: st.KeyID, PublicKey: pub, Expires: now.Add(24 * time.Hour)}}})
	if err != nil {
		return nil, err
	}
	if _, err := c.PutKeySet(ctx, env); err != nil {
		return nil, fmt.Errorf("put key set: %w", err)
	}
	return root.Public().(ed25519.PublicKey), nil
}

func (o *Options) setDefaults() error {
	if o.Nodes <= 0 {
		return fmt.Errorf("bench: nodes must be positive, got %d", o.Nodes)
	}
	if len(o.HostCommand) == 0 {
		return errors.New("bench: no host command")
	}
	if o.Ramp == 0 {
		o.Ramp = 2000
	}
	if o.SettleWait == 0 {
		o.SettleWait = edgeagent.DefaultSettleInterval
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.DeviceProcesses > 1 && len(o.DeviceCommand) == 0 {
		return errors.New("bench: device processes asked but no device command")
	}
	if o.DeviceProcesses > o.Nodes {
		return fmt.Errorf("bench: %d device processes for %d nodes", o.DeviceProcesses, o.Nodes)
	}
	return nil
}

// startHost starts the controller host and reads its HostInfo. wait closes
// its stdin (the host exits on EOF) and waits for it.
func startHost(ctx context.Context, opts Options) (HostInfo, func(), error) {
	args := append(append([]string(nil), opts.HostCommand[1:]...), opts.DataDir)
	cmd := exec.CommandContext(ctx, opts.HostCommand[0], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return HostInfo{}, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return HostInfo{}, nil, err
	}
	if err := cmd.Start(); err != nil {
		return HostInfo{}, nil, fmt.Errorf("start controller host: %w", err)
	}
	wait := func() { _ = stdin.Close(); _ = cmd.Wait() }
	var info HostInfo
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &info)
	}
	if err != nil {
		wait()
		return HostInfo{}, nil, fmt.Errorf("controller host did not report its addresses: %w", err)
	}
	return info, wait, nil
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) run(ctx context.Context) (Result, error) {
	var err error
	if b.res.HeapBefore, b.res.RSSBefore, err = b.memory(ctx); err != nil {
		return b.res, err
	}
	var fleet devices
	stop := func() error {
		if fleet == nil {
			return nil
		}
		var err error
		b.res.Fleet, err = fleet.Stop()
		fleet = nil
		return err
	}
	defer func() { _ = stop() }()
	phases := []struct {
		name    string
		cpu     *PhaseCPU
		traffic *Traffic
		run     func() error
	}{
		{"register", &b.res.RegisterCPU, &b.res.RegisterTraffic, func() error {
			if fleet, err = b.startFleet(ctx); err != nil {
				return err
			}
			if err := b.register(ctx, fleet); err != nil {
				return err
			}
			return b.settle(ctx)
		}},
		{"apply", &b.res.ApplyCPU, &b.res.ApplyTraffic, func() error { return b.apply(ctx) }},
		{"rollout", &b.res.RolloutCPU, &b.res.RolloutTraffic, func() error { return b.rollout(ctx) }},
	}
	for _, p := range phases {
		before, err := b.traffic(ctx)
		if err != nil {
			return b.res, errors.Join(err, stop())
		}
		// A failed phase keeps its CPU figures for the report.
		if *p.cpu, err = b.measure(ctx, p.name, p.run); err != nil {
			return b.res, errors.Join(err, stop())
		}
		after, err := b.traffic(ctx)
		if err != nil {
			return b.res, errors.Join(err, stop())
		}
		*p.traffic = after.sub(before)
	}
	b.res.RolloutBytesPerNode = b.res.RolloutTraffic.BytesOut / float64(b.opts.Nodes)
	b.res.HeapAfter, b.res.RSSAfter, err = b.memory(ctx)
	return b.res, errors.Join(err, stop())
}

// measure runs one phase and returns the CPU time the controller host and
// this process spent meanwhile. With Options.CPUProfile it profiles the
// host for the phase into PhaseProfile(CPUProfile, phase) and splits the
// profile; the profile's start and stop lie outside the CPU readings.
func (b *bench) measure(ctx context.Context, phase string, run func() error) (PhaseCPU, error) {
	var profile string
	if b.opts.CPUProfile != "" {
		abs, err := filepath.Abs(PhaseProfile(b.opts.CPUProfile, phase))
		if err != nil {
			return PhaseCPU{}, err
		}
		if err := b.post(ctx, "/cpuprofile/start?file="+url.QueryEscape(abs)); err != nil {
			return PhaseCPU{}, fmt.Errorf("%s: %w", phase, err)
		}
		profile = abs
	}
	if b.opts.DeviceCPUProfile != "" {
		f, err := os.Create(PhaseProfile(b.opts.DeviceCPUProfile, phase))
		if err != nil {
			return PhaseCPU{}, fmt.Errorf("%s: device profile: %w", phase, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return PhaseCPU{}, fmt.Errorf("%s: device profile: %w", phase, err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	cpu, err := b.readPhase(run)
	if profile == "" {
		return cpu, err
	}
	if serr := b.post(context.Background(), "/cpuprofile/stop"); serr != nil {
		return cpu, errors.Join(err, fmt.Errorf("%s: %w", phase, serr))
	}
	split, serr := ReadProfileSplit(profile)
	if serr != nil {
		return cpu, errors.Join(err, serr)
	}
	cpu.Profile = &split
	return cpu, err
}

// readPhase runs a phase between two CPU readings. A phase that fails
// still reports the CPU time spent until it did.
func (b *bench) readPhase(run func() error) (PhaseCPU, error) {
	start, err := readCPU(b.host.PID, b.devicePIDs, b.opts.BrokerPIDs)
	if err != nil {
		return PhaseCPU{}, fmt.Errorf("read CPU time: %w", err)
	}
	runErr := run()
	end, err := readCPU(b.host.PID, b.devicePIDs, b.opts.BrokerPIDs)
	if err != nil {
		return PhaseCPU{}, errors.Join(runErr, fmt.Errorf("read CPU time: %w", err))
	}
	return end.since(start), runErr
}

// PhaseProfile is the file the CPU profile of one phase goes to: path
// with the phase inserted before its extension (cpu.pprof, apply:
// cpu.apply.pprof).
func PhaseProfile(path, phase string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + phase + ext
}

// startFleet runs the simulated devices against the host's broker (or
// the device brokers), in this process or in device processes, until
// the returned devices are stopped.
func (b *bench) startFleet(ctx context.Context) (devices, error) {
	secretFile := filepath.Join(b.opts.DataDir, credential.SecretFile)
	brokerURL := b.opts.BrokerURL
	if brokerURL == "" {
		brokerURL = "tcp://" + b.host.MQTT
	}
	if b.opts.DeviceProcesses > 1 {
		brokers := b.opts.DeviceBrokers
		if len(brokers) == 0 {
			brokers = []string{brokerURL}
		}
		b.progress("ramping %d devices at %g/s in %d processes over %d brokers", b.opts.Nodes, b.opts.Ramp, b.opts.DeviceProcesses, len(brokers))
		command := b.opts.deviceCommand()
		if b.trustRoot != nil {
			command = append(command, "--trust-root", signing.FormatPublicKey(b.trustRoot))
		}
		return startProcs(ctx, command, secretFile, b.opts.Ramp, shares(b.opts.Nodes, b.opts.DeviceProcesses, brokers))
	}
	secret, err := sim.ReadFleetSecret(secretFile)
	if err != nil {
		return nil, err
	}
	b.progress("ramping %d devices at %g/s", b.opts.Nodes, b.opts.Ramp)
	return startLocal(ctx, b.opts.localFleet(brokerURL, secret, b.trustRoot))
}

// localFleet is the fleet of a run whose devices run in this process:
// every device on brokerURL's brokers (comma-separated), each from a
// loopback address of its own, with the subscriptions' and publishes'
// QoS of o, pinning root when it is set (Signing).
func (o Options) localFleet(brokerURL string, secret []byte, root ed25519.PublicKey) sim.Options {
	src, _ := sim.ParseSourceRange("127.0.0.2-127.0.0.254")
	return sim.Options{
		BrokerURLs: strings.Split(brokerURL, ","), Nodes: o.Nodes, Tokens: sim.SecretTokens(secret),
		Ramp: o.Ramp, SourceAddrs: src, SubscribeAtMostOnce: o.SubscribeAtMostOnce,
		PublishAtMostOnce: o.PublishAtMostOnce, TrustRoot: root, VerifyEach: o.VerifyEach,
	}
}

// deviceCommand is DeviceCommand with the flags every device process
// shares: --subscribe-qos 0 with SubscribeAtMostOnce, --publish-qos 0
// with PublishAtMostOnce, --verify-each with VerifyEach.
func (o Options) deviceCommand() []string {
	cmd := append([]string(nil), o.DeviceCommand...)
	if o.SubscribeAtMostOnce {
		cmd = append(cmd, "--subscribe-qos", "0")
	}
	if o.PublishAtMostOnce {
		cmd = append(cmd, "--publish-qos", "0")
	}
	if o.VerifyEach {
		cmd = append(cmd, "--verify-each")
	}
	return cmd
}

// register waits for the ramp, then times until the controller counts
// every node online and listed by ListNodes (announced with its status).
func (b *bench) register(ctx context.Context, fleet devices) error {
	b.devicePIDs = fleet.PIDs()
	select {
	case <-fleet.RampDone():
	case <-ctx.Done():
		return ctx.Err()
	}
	rampEnd := time.Now()
	b.res.RampSeconds = fleet.RampSeconds()
	b.progress("ramp done in %.2fs; waiting for registration", b.res.RampSeconds)
	err := b.poll(ctx, 50*time.Millisecond, func() (bool, string, error) {
		online, err := b.metric(ctx, `edgeset_nodes{state="online"}`)
		return int(online) == b.opts.Nodes, fmt.Sprintf("%v online", online), err
	})
	if err != nil {
		return fmt.Errorf("registration: %w; %s", err, b.notOnline(ctx))
	}
	// A node is online once its presence is in; it is registered once its
	// status is too, which may follow a moment later.
	var nodes int
	err = b.poll(ctx, 200*time.Millisecond, func() (bool, string, error) {
		list, err := b.api.ListNodes(ctx)
		nodes = len(list)
		return nodes == b.opts.Nodes, fmt.Sprintf("ListNodes returned %d nodes", nodes), err
	})
	if err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	b.res.RegisterSeconds = time.Since(rampEnd).Seconds()
	b.progress("registered %d nodes %.2fs after the ramp", nodes, b.res.RegisterSeconds)
	b.rampEnd = rampEnd
	return nil
}

// settle waits until every device has announced itself again
// (edgeagent.DefaultSettleInterval after it connected, the last of them
// at most the connect timeout after the ramp) and the controller then
// receives fewer than one message per 200 nodes in a second.
func (b *bench) settle(ctx context.Context) error {
	if b.opts.SettleWait < 0 {
		return nil
	}
	start := time.Now()
	select {
	case <-time.After(time.Until(b.rampEnd.Add(b.opts.SettleWait))):
	case <-ctx.Done():
		return ctx.Err()
	}
	quiet := float64(max(1, b.opts.Nodes/200))
	deadline := time.Now().Add(b.opts.Timeout)
	last, err := b.traffic(ctx)
	for err == nil {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		var now Traffic
		if now, err = b.traffic(ctx); err != nil {
			break
		}
		in := now.MessagesIn - last.MessagesIn
		if in < quiet {
			break
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("not quiet within %s: %.0f messages in the last second", b.opts.Timeout, in)
		}
		last = now
	}
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	b.res.SettleSeconds = time.Since(start).Seconds()
	b.progress("fleet settled %.2fs after registration", b.res.SettleSeconds)
	return nil
}

// notOnline describes the nodes the controller does not count online,
// for a registration that did not finish: how many it lists, and the
// first few listed offline with when they went offline.
func (b *bench) notOnline(ctx context.Context) string {
	const maxNamed = 10
	list, err := b.api.ListNodes(ctx)
	if err != nil {
		return fmt.Sprintf("list nodes: %v", err)
	}
	var offline []string
	for _, n := range list {
		if n.Online {
			continue
		}
		if len(offline) == maxNamed {
			offline = append(offline, "...")
			break
		}
		since := "unknown"
		if n.OfflineSince != nil {
			since = n.OfflineSince.Format(time.RFC3339Nano)
		}
		offline = append(offline, fmt.Sprintf("%s (offline since %s)", n.Name, since))
	}
	return fmt.Sprintf("the controller lists %d of %d nodes; offline: %s", len(list), b.opts.Nodes, strings.Join(offline, ", "))
}

// apply times a new daemonset until it is ready on every node.
func (b *bench) apply(ctx context.Context) error {
	start := time.Now()
	if _, err := b.api.Apply(ctx, "bench", []byte(daemonSet("1.0")), false); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	err := b.poll(ctx, 50*time.Millisecond, func() (bool, string, error) {
		st, err := b.status(ctx)
		return st.NumberReady == b.opts.Nodes, fmt.Sprintf("%d ready", st.NumberReady), err
	})
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	b.res.ApplySeconds = time.Since(start).Seconds()
	b.progress("apply: %d ready in %.2fs", b.opts.Nodes, b.res.ApplySeconds)
	return nil
}

// rollout times an image change with maxUnavailable 10% until complete.
func (b *bench) rollout(ctx context.Context) error {
	start := time.Now()
	if _, err := b.api.Apply(ctx, "bench", []byte(daemonSet("1.1")), false); err != nil {
		return fmt.Errorf("rollout apply: %w", err)
	}
	err := b.poll(ctx, 50*time.Millisecond, func() (bool, string, error) {
		ds, err := b.daemonSet(ctx)
		st := ds.Status
		// status.observedGeneration is the spec's generation even before a
		// pass computed the status for it, so the rollout's target tells
		// whether the figures belong to the new revision.
		done := st.Rollout != nil && st.Rollout.Target == ds.CurrentHash && st.Rollout.Complete &&
			st.UpdatedNumberScheduled == b.opts.Nodes && st.NumberAvailable == b.opts.Nodes
		return done, fmt.Sprintf("%d updated, %d available", st.UpdatedNumberScheduled, st.NumberAvailable), err
	})
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	b.res.RolloutSeconds = time.Since(start).Seconds()
	b.progress("rollout complete in %.2fs", b.res.RolloutSeconds)
	return nil
}

// poll calls check every interval until it reports done, failing after
// the phase timeout with check's last state.
func (b *bench) poll(ctx context.Context, interval time.Duration, check func() (bool, string, error)) error {
	deadline := time.Now().Add(b.opts.Timeout)
	for {
		done, state, err := check()
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %s: %s (last error %v)", b.opts.Timeout, state, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func (b *bench) status(ctx context.Context) (api.DaemonSetStatus, error) {
	ds, err := b.daemonSet(ctx)
	return ds.Status, err
}

// daemonSet lists the benchmark's one daemonset.
func (b *bench) daemonSet(ctx context.Context) (api.DaemonSet, error) {
	dss, err := b.api.ListDaemonSets(ctx)
	if err != nil || len(dss) != 1 {
		return api.DaemonSet{}, fmt.Errorf("list daemonsets: %d (%v)", len(dss), err)
	}
	return dss[0], nil
}

// metric reads one sample of the controller's /metrics by its exact
// series text, such as edgeset_nodes{state="online"}.
func (b *bench) metric(ctx context.Context, series string) (float64, error) {
	body, err := b.get(ctx, "http://"+b.host.API+"/metrics")
	if err != nil {
		return 0, err
	}
	return findSample(string(body), series)
}

// traffic reads the controller's MQTT counters.
func (b *bench) traffic(ctx context.Context) (Traffic, error) {
	body, err := b.get(ctx, "http://"+b.host.API+"/metrics")
	if err != nil {
		return Traffic{}, err
	}
	var t Traffic
	for _, m := range []struct {
		series string
		v      *float64
	}{
		{"edgeset_mqtt_messages_in_total", &t.MessagesIn},
		{"edgeset_mqtt_messages_out_total", &t.MessagesOut},
		{"edgeset_mqtt_bytes_out_total", &t.BytesOut},
	} {
		if *m.v, err = findSample(string(body), m.series); err != nil {
			return Traffic{}, err
		}
	}
	return t, nil
}

// findSample returns the value of series in Prometheus text exposition.
func findSample(text, series string) (float64, error) {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", series)
}

// memory reads the host's heap after a GC and its RSS.
func (b *bench) memory(ctx context.Context) (HeapInfo, uint64, error) {
	var h HeapInfo
	body, err := b.get(ctx, "http://"+b.host.Debug+"/heap")
	if err == nil {
		err = json.Unmarshal(body, &h)
	}
	if err != nil {
		return h, 0, fmt.Errorf("host heap: %w", err)
	}
	rss, err := ProcessRSS(b.host.PID)
	return h, rss, err
}

// ProcessRSS returns VmRSS of pid from /proc, in bytes.
func ProcessRSS(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.Fields(v)[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

func (b *bench) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func (b *bench) post(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+b.host.Debug+path, nil)
	if err != nil {
		return err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("host %s: %s: %s", path, resp.Status, msg)
	}
	return nil
}

// daemonSet is the benchmark's daemonset, everywhere, rolling with
// maxUnavailable 10%.
func daemonSet(version string) string {
	return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bench, namespace: default}
spec:
  selector: {matchLabels: {app: bench}}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 10%}
  template:
    metadata: {labels: {app: bench}}
    spec:
      containers:
      - name: bench
        image: registry.local/bench:` + version + "\n"
}
