package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Snapshot is the fleet's state at one moment, as the devices see it.
type Snapshot struct {
	At time.Time `json:"at"`
	// Nodes is the fleet size; Launched how many the ramp started;
	// Connected how many are connected now; Announced how many ever
	// announced themselves.
	Nodes     int `json:"nodes"`
	Launched  int `json:"launched"`
	Connected int `json:"connected"`
	Announced int `json:"announced"`
	// Instances and Ready count daemon instances over all devices.
	Instances int `json:"instances"`
	Ready     int `json:"ready"`
	// DaemonSets counts instances by daemonset, then revision.
	DaemonSets map[string]map[string]Count `json:"daemonSets"`
	// Messages and connection counters summed over the devices' clients.
	Received        uint64 `json:"messagesReceived"`
	Published       uint64 `json:"messagesPublished"`
	Reconnects      uint64 `json:"reconnects"`
	ConnectFailures uint64 `json:"connectFailures"`
	// BytesIn and BytesOut are the devices' MQTT traffic (TCP payload).
	BytesIn  uint64 `json:"bytesIn"`
	BytesOut uint64 `json:"bytesOut"`
	// Flaps counts simulated link failures so far.
	Flaps uint64 `json:"flaps"`
	// SignaturesVerified counts the signatures the devices verified, and
	// SignaturesShared those they accepted from their shared cache
	// (Options.VerifyEach); both zero when the devices do not share one.
	SignaturesVerified uint64 `json:"signaturesVerified,omitempty"`
	SignaturesShared   uint64 `json:"signaturesShared,omitempty"`
}

// Count is the instances of one daemonset revision and how many are ready.
type Count struct {
	Instances int `json:"instances"`
	Ready     int `json:"ready"`
}

// Snapshot collects the devices' state; safe while Run runs.
func (f *Fleet) Snapshot() Snapshot {
	s := Snapshot{At: time.Now(), Nodes: len(f.devices), DaemonSets: map[string]map[string]Count{}}
	for _, d := range f.devices {
		f.addDevice(&s, d)
	}
	s.BytesIn, s.BytesOut, s.Flaps = f.bytes.in.Load(), f.bytes.out.Load(), f.flaps.Load()
	if f.signatures != nil {
		s.SignaturesShared, s.SignaturesVerified, _ = f.signatures.Stats()
	}
	return s
}

func (f *Fleet) addDevice(s *Snapshot, d *device) {
	if d.launched.Load() != 0 {
		s.Launched++
	}
	if d.announced.Load() != 0 {
		s.Announced++
	}
	st := d.node.Client().Stats()
	if st.Connected {
		s.Connected++
	}
	s.Received += st.Received
	s.Published += st.Published
	s.Reconnects += st.Reconnects
	s.ConnectFailures += st.ConnectFailures
	obs, ok := d.node.Agent().Observed()
	if !ok {
		return
	}
	for _, in := range obs.Instances {
		revs := s.DaemonSets[in.DaemonSet]
		if revs == nil {
			revs = map[string]Count{}
			s.DaemonSets[in.DaemonSet] = revs
		}
		c := revs[in.Revision]
		c.Instances++
		s.Instances++
		if in.Ready {
			c.Ready++
			s.Ready++
		}
		revs[in.Revision] = c
	}
}

// Line is a one-line summary: connections, readiness, and per daemonset
// the ready and total instances of each revision.
func (s Snapshot) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s connected %d/%d (launched %d) ready %d/%d",
		s.At.Format("15:04:05"), s.Connected, s.Nodes, s.Launched, s.Ready, s.Instances)
	for _, ds := range sortedKeys(s.DaemonSets) {
		fmt.Fprintf(&b, " | %s", ds)
		for _, rev := range sortedKeys(s.DaemonSets[ds]) {
			c := s.DaemonSets[ds][rev]
			fmt.Fprintf(&b, " %s:%d/%d", shortRev(rev), c.Ready, c.Instances)
		}
	}
	fmt.Fprintf(&b, " | msgs in %d out %d", s.Received, s.Published)
	if s.Flaps > 0 {
		fmt.Fprintf(&b, " flaps %d", s.Flaps)
	}
	return b.String()
}

func shortRev(rev string) string {
	if len(rev) > 10 {
		return rev[:10]
	}
	return rev
}

// Report is the JSON report written when the simulator exits.
type Report struct {
	Nodes int `json:"nodes"`
	// Offline and Flapping count the devices sampled with each behaviour.
	Offline  int `json:"offline"`
	Flapping int `json:"flapping"`
	// DurationSeconds runs from Run's start to the report; RampSeconds to
	// the launch of the last device.
	DurationSeconds float64 `json:"durationSeconds"`
	RampSeconds     float64 `json:"rampSeconds"`
	// NeverConnected counts launched devices that never announced.
	NeverConnected int `json:"neverConnected"`
	// ConnectSeconds is the time from a device's launch to its first
	// announcement (connected, presence published, status sent).
	ConnectSeconds Percentiles `json:"connectSeconds"`
	// Final is the state when the report was made.
	Final Snapshot `json:"final"`
}

// Percentiles of a sample, in seconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Report summarises the run so far.
func (f *Fleet) Report() Report {
	r, _ := f.ReportSamples()
	return r
}

// ReportSamples is Report with the connect times it summarises, in
// seconds: what MergeReports needs to merge the reports of fleets run in
// several processes.
func (f *Fleet) ReportSamples() (Report, []float64) {
	r := Report{Nodes: len(f.devices), Final: f.Snapshot()}
	f.mu.Lock()
	started, rampEnd := f.started, f.rampEnd
	f.mu.Unlock()
	if !started.IsZero() {
		r.DurationSeconds = r.Final.At.Sub(started).Seconds()
	}
	if !rampEnd.IsZero() {
		r.RampSeconds = rampEnd.Sub(started).Seconds()
	}
	var connect []float64
	for _, d := range f.devices {
		if d.profile.Offline {
			r.Offline++
		} else if d.profile.Flaps {
			r.Flapping++
		}
		l, a := d.launched.Load(), d.announced.Load()
		switch {
		case l != 0 && a == 0:
			r.NeverConnected++
		case l != 0:
			connect = append(connect, time.Duration(a-l).Seconds())
		}
	}
	samples := slices.Clone(connect)
	r.ConnectSeconds = percentiles(connect)
	return r, samples
}

// MergeReports is the report of one fleet run as several (one per
// process): counts summed, the longest duration and ramp, the connect
// percentiles of every sample together, the final snapshots merged.
func MergeReports(parts []Report, samples [][]float64) Report {
	var r Report
	var all []float64
	for i, p := range parts {
		r.Nodes += p.Nodes
		r.Offline += p.Offline
		r.Flapping += p.Flapping
		r.NeverConnected += p.NeverConnected
		r.DurationSeconds = max(r.DurationSeconds, p.DurationSeconds)
		r.RampSeconds = max(r.RampSeconds, p.RampSeconds)
		r.Final = mergeSnapshots(r.Final, p.Final)
		if i < len(samples) {
			all = append(all, samples[i]...)
		}
	}
	r.ConnectSeconds = percentiles(all)
	return r
}

// mergeSnapshots adds snapshot b to a; the later of the two instants is
// the merged one's.
func mergeSnapshots(a, b Snapshot) Snapshot {
	if b.At.After(a.At) {
		a.At = b.At
	}
	a.Nodes += b.Nodes
	a.Launched += b.Launched
	a.Connected += b.Connected
	a.Announced += b.Announced
	a.Instances += b.Instances
	a.Ready += b.Ready
	a.Received += b.Received
	a.Published += b.Published
	a.Reconnects += b.Reconnects
	a.ConnectFailures += b.ConnectFailures
	a.BytesIn += b.BytesIn
	a.BytesOut += b.BytesOut
	a.Flaps += b.Flaps
	a.SignaturesVerified += b.SignaturesVerified
	a.SignaturesShared += b.SignaturesShared
	for ds, revs := range b.DaemonSets {
		if a.DaemonSets == nil {
			a.DaemonSets = map[string]map[string]Count{}
		}
		if a.DaemonSets[ds] == nil {
			a.DaemonSets[ds] = map[string]Count{}
		}
		for rev, c := range revs {
			sum := a.DaemonSets[ds][rev]
			sum.Instances += c.Instances
			sum.Ready += c.Ready
			a.DaemonSets[ds][rev] = sum
		}
	}
	return a
}

// percentiles of xs (nearest rank); xs is sorted in place.
func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	slices.Sort(xs)
	rank := func(q float64) float64 {
		i := int(q*float64(len(xs))+0.999999) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	return Percentiles{Count: len(xs), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: xs[len(xs)-1]}
}
