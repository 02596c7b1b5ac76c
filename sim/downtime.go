package sim

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
)

// Downtime is one switch of a daemon on a device from one revision to
// another: from the last container of the old instance stopping to the
// first main container of the new one starting (ready, for a daemon
// without a readiness probe), by the device engine's clock.
type Downtime struct {
	Node, DaemonSet string
	From, To        string // revisions
	Stopped         time.Time
	Started         time.Time
	// ImagePulled is when the engine finished pulling the new container's
	// image (zero if it was there from the start): before Stopped when the
	// device downloaded it ahead of the switch.
	ImagePulled time.Time
}

// Duration is how long the device ran no instance of the daemon.
func (d Downtime) Duration() time.Duration { return d.Started.Sub(d.Stopped) }

// Downtimes returns every switch the devices recorded (Options.
// RecordDowntime), sorted by node, then time.
func (f *Fleet) Downtimes() []Downtime {
	var out []Downtime
	for _, d := range f.devices {
		if d.downtime != nil {
			out = append(out, d.downtime.list()...)
		}
	}
	slices.SortStableFunc(out, func(a, b Downtime) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return a.Stopped.Compare(b.Stopped)
	})
	return out
}

// downtimeWatch follows one device's engine events: the daemons with no
// main container running, since when and of which revision, and the
// switches recorded.
type downtimeWatch struct {
	node string
	rt   *fake.Runtime

	mu      sync.Mutex // guards the fields below
	running map[string]mainContainer
	down    map[string]stopped // by daemonset
	done    []Downtime
}

type mainContainer struct{ daemonSet, revision string }

type stopped struct {
	revision string
	at       time.Time
}

func newDowntimeWatch(node string, rt *fake.Runtime) *downtimeWatch {
	return &downtimeWatch{node: node, rt: rt, running: map[string]mainContainer{}, down: map[string]stopped{}}
}

// run follows the engine's events until ctx ends, subscribing again when
// the stream ends (a slow reader's overflow).
func (w *downtimeWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		events, errs := w.rt.Events(ctx)
		w.seed()
		w.follow(ctx, events, errs)
	}
}

// seed adds the main containers running now (events before a
// subscription are not delivered).
func (w *downtimeWatch) seed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.rt.Containers() {
		ds := c.Labels[edgeagent.LabelDaemonSet]
		if _, main := c.Labels[edgeagent.LabelIndex]; main && ds != "" && c.Running {
			w.running[c.ID] = mainContainer{ds, c.Labels[edgeagent.LabelRevision]}
		}
	}
}

func (w *downtimeWatch) follow(ctx context.Context, events <-chan edgeagent.RuntimeEvent, errs <-chan error) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-errs:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			w.apply(ctx, ev)
		}
	}
}

// apply records one event of a managed main container.
func (w *downtimeWatch) apply(ctx context.Context, ev edgeagent.RuntimeEvent) {
	ds, rev := ev.Labels[edgeagent.LabelDaemonSet], ev.Labels[edgeagent.LabelRevision]
	if _, main := ev.Labels[edgeagent.LabelIndex]; !main || ds == "" {
		return
	}
	var pulled time.Time
	if ev.Action == "start" {
		if st, err := w.rt.Inspect(ctx, ev.ContainerID); err == nil {
			pulled, _ = w.rt.PulledAt(st.Image)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Action {
	case "start":
		w.running[ev.ContainerID] = mainContainer{ds, rev}
		if s, ok := w.down[ds]; ok {
			delete(w.down, ds)
			if s.revision != rev {
				w.done = append(w.done, Downtime{Node: w.node, DaemonSet: ds, From: s.revision, To: rev,
					Stopped: s.at, Started: ev.Time, ImagePulled: pulled})
			}
		}
	case "die", "destroy":
		if _, ok := w.running[ev.ContainerID]; !ok {
			return
		}
		delete(w.running, ev.ContainerID)
		if !w.runsLocked(ds) {
			w.down[ds] = stopped{revision: rev, at: ev.Time}
		}
	}
}

func (w *downtimeWatch) runsLocked(ds string) bool {
	for _, c := range w.running {
		if c.daemonSet == ds {
			return true
		}
	}
	return false
}

func (w *downtimeWatch) list() []Downtime {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.done)
}
