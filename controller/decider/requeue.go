package decider

import (
	"container/heap"
	"time"
)

// requeueHeap orders nodes by the instant the clock alone changes their
// plan. Entries are never updated in place: a node's newer instant is a
// new entry, and an entry that no longer matches its node's next is
// skipped when it surfaces.
type requeueHeap []requeueEntry

type requeueEntry struct {
	at   time.Time
	node string
}

func (h requeueHeap) Len() int           { return len(h) }
func (h requeueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h requeueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *requeueHeap) Push(x any)        { *h = append(*h, x.(requeueEntry)) }
func (h *requeueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// schedule sets when n is next planned by the clock alone.
func (d *Decider) schedule(n *node, at time.Time) {
	if at.Equal(n.next) {
		return
	}
	n.next = at
	if !at.IsZero() {
		heap.Push(&d.requeue, requeueEntry{at: at, node: n.Name})
	}
	if len(d.requeue) > 2*len(d.nodes)+1024 {
		d.compactRequeue()
	}
}

// Due returns the nodes whose instant (see Decision.RequeueAt) has come by
// now, marked for the next decision: the caller gives the decider their
// facts as of now (SetNode), which the clock may have changed.
func (d *Decider) Due(now time.Time) []string {
	var out []string
	for len(d.requeue) > 0 && !d.requeue[0].at.After(now) {
		e := heap.Pop(&d.requeue).(requeueEntry)
		if n, ok := d.nodes[e.node]; ok && n.next.Equal(e.at) {
			n.next = time.Time{}
			d.dirty[e.node] = true
			out = append(out, e.node)
		}
	}
	return out
}

// nextNode returns the earliest live instant of the heap, dropping stale
// entries on the way; zero if none.
func (d *Decider) nextNode() time.Time {
	for len(d.requeue) > 0 {
		e := d.requeue[0]
		if n, ok := d.nodes[e.node]; ok && n.next.Equal(e.at) {
			return e.at
		}
		heap.Pop(&d.requeue)
	}
	return time.Time{}
}

// compactRequeue rebuilds the heap from the nodes' live instants.
func (d *Decider) compactRequeue() {
	h := make(requeueHeap, 0, len(d.nodes))
	for name, n := range d.nodes {
		if !n.next.IsZero() {
			h = append(h, requeueEntry{at: n.next, node: name})
		}
	}
	heap.Init(&h)
	d.requeue = h
}
