package rollout

import "hash/maphash"

// nameIndex finds a Tracker's members by node name: an open-addressing hash
// table (linear probing) of member indices that keeps no copy of the
// names, reading them from the members slice instead. It costs about 4 to
// 10 bytes per member, where a map[string]int32 costs about 40.
//
// Every method takes the members slice the indices refer to; the table
// holds each index in [0, len(members)) exactly once, under the hash of
// members[i].name, and no other.
type nameIndex struct {
	seed  maphash.Seed
	slots []uint32 // a member index + 1; 0: empty
	n     int      // the occupied slots
}

func newNameIndex() nameIndex { return nameIndex{seed: maphash.MakeSeed()} }

// find returns the index of the member named name.
func (x *nameIndex) find(members []member, name string) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	mask := len(x.slots) - 1
	for s := x.home(name); ; s = (s + 1) & mask {
		v := x.slots[s]
		if v == 0 {
			return 0, false
		}
		if members[v-1].name == name {
			return int32(v - 1), true
		}
	}
}

// add indexes member i, whose name the table does not hold.
func (x *nameIndex) add(members []member, i int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow(members)
	}
	x.put(members[i].name, i)
	x.n++
}

// put stores i in the first empty slot from name's home.
func (x *nameIndex) put(name string, i int32) {
	mask := len(x.slots) - 1
	s := x.home(name)
	for x.slots[s] != 0 {
		s = (s + 1) & mask
	}
	x.slots[s] = uint32(i) + 1
}

// grow doubles the table (8 slots at first) and indexes every member in it
// again.
func (x *nameIndex) grow(members []member) {
	old := x.slots
	x.slots = make([]uint32, max(8, 2*len(old)))
	for _, v := range old {
		if v != 0 {
			x.put(members[v-1].name, int32(v-1))
		}
	}
}

// remove drops member i's index: the entries after it in its probe run
// move back so that no search stops early (backward-shift deletion).
func (x *nameIndex) remove(members []member, i int32) {
	mask := len(x.slots) - 1
	hole := x.slotOf(members, i)
	x.slots[hole] = 0
	x.n--
	for s := (hole + 1) & mask; x.slots[s] != 0; s = (s + 1) & mask {
		home := x.home(members[x.slots[s]-1].name)
		// The entry at s may fill the hole when its home is not in the
		// cyclic range (hole, s].
		if (s-home)&mask >= (s-hole)&mask {
			x.slots[hole], x.slots[s] = x.slots[s], 0
			hole = s
		}
	}
}

// move records that member from is now at index to (the members slice
// moved it); members[from] still holds it.
func (x *nameIndex) move(members []member, from, to int32) {
	x.slots[x.slotOf(members, from)] = uint32(to) + 1
}

// slotOf returns the slot that holds member i.
func (x *nameIndex) slotOf(members []member, i int32) int {
	mask := len(x.slots) - 1
	s := x.home(members[i].name)
	for x.slots[s] != uint32(i)+1 {
		s = (s + 1) & mask
	}
	return s
}

func (x *nameIndex) home(name string) int {
	return int(maphash.String(x.seed, name) & uint64(len(x.slots)-1))
}
