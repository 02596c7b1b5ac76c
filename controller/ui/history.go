package ui

import (
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/api"
)

// progressPoint is one sample of a daemonset's rollout progress.
type progressPoint struct {
	At      time.Time
	Total   int
	Updated int
	Failed  int
}

// progressHistory keeps the last points samples of each daemonset's
// progress, for at most tracked daemonsets: bounded memory whatever the
// fleet applies (points x tracked x one point, about 50 B).
type progressHistory struct {
	points, tracked int

	mu   sync.Mutex // guards byDS
	byDS map[string][]progressPoint
}

func newProgressHistory(points, tracked int) *progressHistory {
	return &progressHistory{points: points, tracked: tracked, byDS: map[string][]progressPoint{}}
}

// record adds a sample of every daemonset of dss and forgets the
// daemonsets no longer in it.
func (h *progressHistory) record(now time.Time, dss []api.DaemonSet) {
	h.mu.Lock()
	defer h.mu.Unlock()
	live := make(map[string]bool, len(dss))
	for i := range dss {
		s := sampleOf(&dss[i])
		live[s.Key] = true
		pts, ok := h.byDS[s.Key]
		if !ok && len(h.byDS) >= h.tracked {
			continue
		}
		p := progressPoint{At: now, Total: s.Total, Updated: s.Updated, Failed: s.Failed}
		if len(pts) >= h.points {
			copy(pts, pts[1:])
			pts[len(pts)-1] = p
		} else {
			pts = append(pts, p)
		}
		h.byDS[s.Key] = pts
	}
	for k := range h.byDS {
		if !live[k] {
			delete(h.byDS, k)
		}
	}
}

// get returns a copy of key's samples, oldest first.
func (h *progressHistory) get(key string) []progressPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]progressPoint(nil), h.byDS[key]...)
}
