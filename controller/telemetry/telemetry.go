// Package telemetry keeps what the fleet's agents report of their
// resources (schema.Telemetry): per node, the latest report and a short
// history of its host figures, for `describe node` and the dashboard's
// plots. Nothing is decided on it and nothing of it is stored: a restarted
// controller learns it again from the next reports.
//
// # Memory
//
// A node that never reports costs nothing. One that does holds its latest
// report (about 200 bytes plus 80 per instance) and at most Limit points
// of history of 40 bytes each, allocated as they come: with the default
// DefaultLimit of 30 and one instance, 1.6 KB per reporting node
// (BenchmarkMemoryPerNode).
package telemetry

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// DefaultLimit is the history kept per node by default.
const DefaultLimit = 30

// MinSpacing is the shortest time between two reports of one node that
// are both kept: an agent publishes on a meaningful change, at most every
// telemetry-interval (30 s by default), so a faster stream is a
// misbehaving or hostile one, and only its latest report counts.
const MinSpacing = time.Second

// point is one report's host figures, compact.
type point struct {
	at           int64   // received, unix seconds
	load1        float32 // one-minute load average
	temp         float32 // degrees Celsius; NaN when not reported
	memAvailable int64
	dataFree     int64 // free bytes of the agent's data filesystem, -1 if not reported
	dockerFree   int64 // of the engine's root, -1 if not reported
}

// Point is one report's host figures, as the API gives them, at the time
// the controller received it.
type Point struct {
	Time                 time.Time `json:"time"`
	Load1                float64   `json:"load1"`
	MemoryAvailableBytes int64     `json:"memoryAvailableBytes"`
	// DataFreeBytes and DockerFreeBytes are the free bytes of the
	// agent's data filesystem and of the engine's root (nil when not
	// reported).
	DataFreeBytes      *int64   `json:"dataFreeBytes,omitempty"`
	DockerFreeBytes    *int64   `json:"dockerFreeBytes,omitempty"`
	TemperatureCelsius *float64 `json:"temperatureCelsius,omitempty"`
}

// Node is what is known of one node's telemetry: its latest report and the
// history of host figures, oldest first (the latest report's included).
type Node struct {
	Latest   schema.Telemetry `json:"latest"`
	Received time.Time        `json:"received"`
	History  []Point          `json:"history"`
}

// record is one node's telemetry; ring holds the history, next is where
// the next point goes once ring is full.
type record struct {
	latest   schema.Telemetry
	received time.Time
	ring     []point
	next     int
}

// Store holds the fleet's telemetry. Safe for concurrent use.
type Store struct {
	limit int

	mu    sync.Mutex // guards nodes
	nodes map[string]*record
}

// New returns a Store keeping limit points per node (DefaultLimit if 0;
// a negative limit keeps only the latest report).
func New(limit int) *Store {
	if limit == 0 {
		limit = DefaultLimit
	}
	return &Store{limit: max(limit, 0), nodes: map[string]*record{}}
}

// Add records m, received at now on the controller's clock, which is
// what the history's points are timed by: device clocks order nothing. A
// report less than MinSpacing after the previous kept one replaces the
// latest report without adding a point.
func (s *Store) Add(m schema.Telemetry, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.nodes[m.Node]
	if rec == nil {
		rec = &record{}
		s.nodes[m.Node] = rec
	}
	spaced := rec.received.IsZero() || now.Sub(rec.received) >= MinSpacing
	rec.latest = m
	if !spaced {
		return
	}
	rec.received = now
	if s.limit == 0 {
		return
	}
	p := pointOf(&m, now)
	if len(rec.ring) < s.limit {
		rec.ring = append(rec.ring, p)
		return
	}
	rec.ring[rec.next] = p
	rec.next = (rec.next + 1) % len(rec.ring)
}

func pointOf(m *schema.Telemetry, now time.Time) point {
	p := point{at: now.Unix(), load1: float32(m.Load1), temp: float32(math.NaN()),
		memAvailable: m.MemoryAvailableBytes, dataFree: -1, dockerFree: -1}
	if m.TemperatureCelsius != nil {
		p.temp = float32(*m.TemperatureCelsius)
	}
	for _, d := range m.Disks {
		switch d.Name {
		case schema.DiskData:
			p.dataFree = d.FreeBytes
		case schema.DiskDocker:
			p.dockerFree = d.FreeBytes
		}
	}
	return p
}

// Get returns node's telemetry; ok is false when it never reported.
func (s *Store) Get(node string) (Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.nodes[node]
	if rec == nil {
		return Node{}, false
	}
	out := Node{Latest: rec.latest, Received: rec.received, History: make([]Point, 0, len(rec.ring))}
	out.Latest.Disks = slices.Clone(rec.latest.Disks)
	out.Latest.Instances = slices.Clone(rec.latest.Instances)
	for i := range rec.ring {
		out.History = append(out.History, rec.ring[(rec.next+i)%len(rec.ring)].api())
	}
	return out, true
}

func (p point) api() Point {
	out := Point{Time: time.Unix(p.at, 0).UTC(), Load1: float64(p.load1), MemoryAvailableBytes: p.memAvailable}
	if p.dataFree >= 0 {
		out.DataFreeBytes = &p.dataFree
	}
	if p.dockerFree >= 0 {
		out.DockerFreeBytes = &p.dockerFree
	}
	if !math.IsNaN(float64(p.temp)) {
		t := math.Round(float64(p.temp)*10) / 10
		out.TemperatureCelsius = &t
	}
	return out
}

// Delete forgets node (deleted from the fleet).
func (s *Store) Delete(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, node)
}

// Len is the number of nodes with telemetry.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

// Bytes renders a byte count in binary units (12.3 MiB), as describe node
// and the dashboard show telemetry figures.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
