package decider

import (
	"hash/maphash"
	"slices"

	"github.com/edgeset/edgeset/schema"
)

// instanceLists interns the instance lists of the desired states the
// decider assembles: the nodes that run the same daemonsets at the same
// revisions (most of a fleet, in a few groups) share one list instead of
// holding a copy each. A desired state's lists are read-only (see
// reconcile.NodeDesired), so sharing changes nothing but the heap.
//
// It remembers at most maxInternedLists lists and forgets them all when
// full: lists shared until then stay shared, and a list no node holds any
// more is kept only until then.
type instanceLists struct {
	seed  maphash.Seed
	lists map[uint64][]schema.DesiredInstance // by hash of their content
}

// maxInternedLists bounds the lists an instanceLists remembers.
const maxInternedLists = 4096

func newInstanceLists() instanceLists {
	return instanceLists{seed: maphash.MakeSeed(), lists: map[uint64][]schema.DesiredInstance{}}
}

// intern returns the remembered list equal to list, or remembers list and
// returns it. A list whose hash another list holds stays unshared.
func (l *instanceLists) intern(list []schema.DesiredInstance) []schema.DesiredInstance {
	if len(list) == 0 {
		return list
	}
	h := l.hash(list)
	if have, ok := l.lists[h]; ok {
		if slices.Equal(have, list) {
			return have
		}
		return list
	}
	if len(l.lists) >= maxInternedLists {
		clear(l.lists)
	}
	l.lists[h] = list
	return list
}

func (l *instanceLists) hash(list []schema.DesiredInstance) uint64 {
	var h maphash.Hash
	h.SetSeed(l.seed)
	for i := range list {
		h.WriteString(list[i].DaemonSet)
		h.WriteByte(0)
		h.WriteString(list[i].Revision)
		h.WriteByte(0)
		h.WriteString(list[i].OverrideUpdateLock)
		h.WriteByte(0)
	}
	return h.Sum64()
}
