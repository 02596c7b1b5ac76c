package sim

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// DefaultNamePrefix names devices sim-00000, sim-00001, ...
const DefaultNamePrefix = "sim-"

// Options configure a Fleet. Zero optional fields take the defaults
// documented on each.
type Options struct {
	// BrokerURLs are the nodes of the MQTT broker the devices connect to.
	// Device i starts on node i modulo their number, so the fleet spreads
	// evenly over them, and fails over round-robin from there
	// (mqttclient.Options.BrokerURLs). BrokerURLs or BrokerURL is required.
	BrokerURLs []string
	// BrokerURL is shorthand for a one-element BrokerURLs; set one, not
	// both.
	BrokerURL string
	// Nodes is the number of devices; required unless Names is set, when
	// zero means all of Names.
	Nodes int
	// NamePrefix names device i NamePrefix plus i in five or more digits;
	// default DefaultNamePrefix. Ignored when Names is set.
	NamePrefix string
	// Names, when set, are the device names (from a token file).
	Names []string
	// Tokens returns each device's MQTT password; required.
	Tokens TokenFunc
	// Shape is the fleet's labels, taints and behaviour.
	Shape Shape
	// Ramp is how many devices start connecting per second; zero starts
	// them all at once.
	Ramp float64
	// SourceAddrs are the local addresses devices dial from, round-robin
	// (so a large fleet on one machine does not run out of ephemeral
	// ports); empty lets the kernel choose.
	SourceAddrs []netip.Addr
	// KeepAlive is each device's MQTT keepalive; default 60 s.
	KeepAlive time.Duration
	// Backoff is each device's reconnection schedule; the zero value is
	// 1 s doubling to 30 s.
	Backoff mqttclient.Backoff
	// SubscribeAtMostOnce subscribes every device at QoS 0 instead of 1
	// (edgeagent.NodeOptions.SubscribeAtMostOnce): set it on a NATS
	// cluster.
	SubscribeAtMostOnce bool
	// PublishAtMostOnce publishes at QoS 0 instead of 1
	// (edgeagent.NodeOptions.PublishAtMostOnce): set it on a NATS cluster.
	PublishAtMostOnce bool
	// TrustRoot, when set, is the fleet root every device pins: each then
	// verifies what the controller signs (edgeagent.Config.TrustRoot), as
	// a real agent enrolled in a signing fleet does.
	TrustRoot ed25519.PublicKey
	// VerifyEach has every device verify every signature itself. By
	// default, with a TrustRoot, the devices share one
	// signing.SignatureCache: a signature one device verified (a batch's,
	// shared by four desired states; a revision's, by every node) the
	// others accept without verifying it again, and check everything else
	// (key, topic, node, generation, expiry) each on its own. On a fleet
	// each device verifies on its own CPU; in the simulator all of them
	// share the machine with the controller under test, whose figures the
	// devices' verification would otherwise inflate.
	VerifyEach bool
	// Logger receives the agents' warnings; default discard.
	Logger *slog.Logger
	// RecordDowntime has every device record each switch of a daemon from
	// one revision to another and how long it had none running
	// (Fleet.Downtimes). It costs a runtime event subscription per device.
	RecordDowntime bool
}

// Fleet is a set of simulated devices. Create it with New and run it with
// Run; Snapshot may be called at any time.
type Fleet struct {
	opts    Options
	devices []*device
	bytes   byteCounters
	flaps   atomic.Uint64
	// signatures is the devices' shared cache of verified signatures;
	// nil without a TrustRoot or with VerifyEach.
	signatures *signing.SignatureCache

	mu       sync.Mutex // guards started and rampEnd
	started  time.Time
	rampEnd  time.Time
	rampDone chan struct{} // closed when every device was launched
}

// device is one simulated device.
type device struct {
	name      string
	profile   Profile
	rt        *fake.Runtime
	link      *Link
	downtime  *downtimeWatch // nil unless Options.RecordDowntime
	node      *edgeagent.Node
	launched  atomic.Int64  // Unix nanoseconds the ramp started it; 0 before
	announced atomic.Int64  // Unix nanoseconds of its first status; 0 before
	up        chan struct{} // closed at the first announcement
	upOnce    sync.Once
}

// New validates opts and prepares every device (agent, fake runtime,
// link). Nothing connects before Run.
func New(opts Options) (*Fleet, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &Fleet{opts: opts, rampDone: make(chan struct{})}
	if opts.TrustRoot != nil && !opts.VerifyEach {
		// A batch signature per four nodes and one per revision: a
		// node's worth holds every signature of a few generations.
		f.signatures = signing.NewSignatureCache(max(opts.Nodes, 1024))
	}
	f.devices = make([]*device, opts.Nodes)
	for i := range f.devices {
		if f.devices[i], err = f.newDevice(i); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.BrokerURL != "" && len(o.BrokerURLs) > 0:
		return o, errors.New("fleet: BrokerURL and BrokerURLs: set one, not both")
	case o.BrokerURL != "":
		o.BrokerURLs, o.BrokerURL = []string{o.BrokerURL}, ""
	case len(o.BrokerURLs) == 0:
		return o, errors.New("fleet: broker URL is required")
	}
	if o.Tokens == nil {
		return o, errors.New("fleet: credentials are required (fleet secret or token file)")
	}
	if o.Nodes == 0 {
		o.Nodes = len(o.Names)
	}
	switch {
	case o.Nodes <= 0:
		return o, fmt.Errorf("fleet: nodes must be positive, got %d", o.Nodes)
	case len(o.Names) > 0 && o.Nodes > len(o.Names):
		return o, fmt.Errorf("fleet: %d nodes asked but the token file names only %d", o.Nodes, len(o.Names))
	case o.Ramp < 0:
		return o, fmt.Errorf("fleet: ramp must not be negative, got %g", o.Ramp)
	}
	if o.NamePrefix == "" {
		o.NamePrefix = DefaultNamePrefix
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 60 * time.Second
	}
	if o.Backoff == (mqttclient.Backoff{}) {
		o.Backoff = mqttclient.Backoff{Initial: time.Second, Max: 30 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// brokersOf returns device i's broker list: BrokerURLs rotated to start at
// node i modulo their number.
func (o Options) brokersOf(i int) []string {
	n := len(o.BrokerURLs)
	start := i % n
	return append(append(make([]string, 0, n), o.BrokerURLs[start:]...), o.BrokerURLs[:start]...)
}

// name returns device i's node name.
func (o Options) name(i int) string {
	if len(o.Names) > 0 {
		return o.Names[i]
	}
	return fmt.Sprintf("%s%05d", o.NamePrefix, i)
}

func (f *Fleet) newDevice(i int) (*device, error) {
	name := f.opts.name(i)
	if !schema.ValidNodeName(name) {
		return nil, fmt.Errorf("fleet: %q is not a valid node name (check the name prefix)", name)
	}
	token, err := f.opts.Tokens(name)
	if err != nil {
		return nil, err
	}
	d := &device{name: name, profile: f.opts.Shape.Profile(i), up: make(chan struct{})}
	d.rt = newRuntime(d.profile, f.opts.Shape.Behaviour.PreloadedImages)
	if f.opts.RecordDowntime {
		d.downtime = newDowntimeWatch(name, d.rt)
	}
	d.link = &Link{bytes: &f.bytes}
	if n := len(f.opts.SourceAddrs); n > 0 {
		d.link.src = net.TCPAddrFromAddrPort(netip.AddrPortFrom(f.opts.SourceAddrs[i%n], 0))
	}
	d.node, err = edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: name, Ephemeral: true, Logger: f.opts.Logger, ProbeDial: dialDaemon,
			TrustRoot: f.opts.TrustRoot, SignatureCache: f.signatures},
		MQTT: mqttclient.Options{
			BrokerURLs: f.opts.brokersOf(i), OrderedBrokers: true, Password: token, KeepAlive: f.opts.KeepAlive,
			Backoff: f.opts.Backoff, FirstConnectJitter: -1, Dial: d.link.Dial,
			Logger: f.opts.Logger,
		},
		Status:              d.status,
		SubscribeAtMostOnce: f.opts.SubscribeAtMostOnce,
		PublishAtMostOnce:   f.opts.PublishAtMostOnce,
	}, d.rt)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return d, nil
}

// newRuntime is a fake engine with the device's behaviour.
func newRuntime(p Profile, preloaded []string) *fake.Runtime {
	rt := fake.New()
	rt.AddImage(preloaded...)
	rt.StartLatency = p.StartLatency
	rt.ImageSize, rt.LinkBytesPerSecond = p.ImageSize, p.LinkBytesPerSecond
	rt.ImagePullFailure = func(image string) error {
		if p.PullFails(image) {
			return errors.New("simulated pull failure: manifest unknown")
		}
		return nil
	}
	rt.CrashAfter = func(spec edgeagent.ContainerSpec) (int, time.Duration, bool) {
		return 1, p.CrashAfter, p.CrashLoops(spec.Image)
	}
	rt.ExecResult = func(c edgeagent.ContainerState, _ []string) (int, []byte, error) {
		if time.Since(c.StartedAt) < p.ReadinessDelay {
			return 1, []byte("simulated readiness delay"), nil
		}
		return 0, nil, nil
	}
	return rt
}

// status is the device's announcement; its first call marks the device
// connected (the node calls it right after announcing presence).
func (d *device) status(context.Context) schema.NodeStatus {
	d.upOnce.Do(func() {
		d.announced.Store(time.Now().UnixNano())
		close(d.up)
	})
	labels := make(map[string]string, len(d.profile.Labels)+1)
	for k, v := range d.profile.Labels {
		labels[k] = v
	}
	labels[schema.LabelHostname] = d.name
	if !d.profile.NoPrefetch {
		labels[schema.LabelPrefetch] = "true" // its agent prefetches
	}
	return schema.NodeStatus{
		Labels: labels, Taints: d.profile.Taints,
		Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
		Info: schema.NodeInfo{AgentVersion: schema.Version, OS: labels[schema.LabelOS], Arch: labels[schema.LabelArch],
			Runtime: "sim"},
	}
}

// Run launches the devices at the ramp rate and runs them until ctx ends,
// then disconnects them all; it returns once every device has stopped,
// with the first device's error, if any.
func (f *Fleet) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	start := time.Now()
	f.mu.Lock()
	f.started = start
	f.mu.Unlock()
	launched := 0
	for launched < len(f.devices) && ctx.Err() == nil {
		due := len(f.devices)
		if f.opts.Ramp > 0 {
			due = min(due, int(time.Since(start).Seconds()*f.opts.Ramp)+1)
		}
		for ; launched < due; launched++ {
			d := f.devices[launched]
			d.launched.Store(time.Now().UnixNano())
			g.Go(func() error { return f.runDevice(ctx, d) })
		}
		if launched < len(f.devices) {
			sleep(ctx, 5*time.Millisecond)
		}
	}
	f.mu.Lock()
	f.rampEnd = time.Now()
	f.mu.Unlock()
	close(f.rampDone)
	return g.Wait()
}

// RampDone is closed once every device has been launched (or Run ended
// early).
func (f *Fleet) RampDone() <-chan struct{} { return f.rampDone }

// runDevice runs one device's agent and its link schedule.
func (f *Fleet) runDevice(ctx context.Context, d *device) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	switch {
	case d.profile.Offline:
		wg.Go(func() { d.goOffline(ctx) })
	case d.profile.Flaps:
		wg.Go(func() { f.flap(ctx, d) })
	}
	if d.downtime != nil {
		wg.Go(func() { d.downtime.run(ctx) })
	}
	err := d.node.Run(ctx)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("device %s: %w", d.name, err)
	}
	return nil
}

// goOffline cuts the link for good OfflineAfter after the first
// announcement.
func (d *device) goOffline(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-d.up:
	}
	if sleep(ctx, d.profile.OfflineAfter) {
		d.link.SetDown(true)
	}
}

// flap cuts and restores the link on the Shape's schedule, from the first
// announcement on.
func (f *Fleet) flap(ctx context.Context, d *device) {
	select {
	case <-ctx.Done():
		return
	case <-d.up:
	}
	fl := f.opts.Shape.Behaviour.Flapping
	rng := deviceRand(f.opts.Shape.Seed, d.profile.Index, 1)
	for sleep(ctx, fl.Every.Sample(rng)) {
		d.link.SetDown(true)
		f.flaps.Add(1)
		ok := sleep(ctx, fl.Down.Sample(rng))
		d.link.SetDown(false)
		if !ok {
			return
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
