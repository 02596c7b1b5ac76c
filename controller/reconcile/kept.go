package reconcile

import (
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
)

// Kept holds the placement decisions of many nodes in compact form, a
// placement.Verdict per daemonset and the few eviction instants, so that
// a caller that places every node before assembling any (a rollout step
// runs between) assembles them without deciding again: Planner.Recall
// rebuilds a node's Placement from its row. At 100,000 nodes and 20
// daemonsets a Kept holds 2 MB where the Placements would hold 270 MB.
//
// A Kept serves one Planner (and its forks): its rows are as wide as the
// Planner's daemonsets. The zero Kept is empty; Reset empties it for
// another Planner, keeping its room.
type Kept struct {
	width    int
	verdicts []placement.Verdict // row after row, width apiece
	// evictAt holds the decisions with an eviction instant (a NoExecute
	// taint tolerated for tolerationSeconds), by cell: row*width + k.
	evictAt map[int]time.Time
}

// Reset empties k for rows of width daemonsets, with room for rows.
func (k *Kept) Reset(width, rows int) {
	k.width, k.verdicts = width, slices.Grow(k.verdicts[:0], width*rows)
	clear(k.evictAt)
}

// Room is the number of decisions k has room for without growing.
func (k *Kept) Room() int { return cap(k.verdicts) }

// Rows is the number of placements kept.
func (k *Kept) Rows() int {
	if k.width == 0 {
		return 0
	}
	return len(k.verdicts) / k.width
}

// Keep adds pl's decisions as a new row and returns it.
func (k *Kept) Keep(pl *Placement) int {
	if len(pl.DaemonSets) != k.width {
		panic("reconcile: Keep of a Placement of another width")
	}
	row := k.Rows()
	for i := range pl.DaemonSets {
		d := &pl.DaemonSets[i].Decision
		k.verdicts = append(k.verdicts, d.Verdict())
		if !d.EvictAt.IsZero() {
			if k.evictAt == nil {
				k.evictAt = map[int]time.Time{}
			}
			k.evictAt[row*k.width+i] = d.EvictAt
		}
	}
	return row
}

// at returns the verdict and eviction instant of daemonset i in row.
func (k *Kept) at(row, i int) (placement.Verdict, time.Time) {
	cell := row*k.width + i
	return k.verdicts[cell], k.evictAt[cell]
}
