package rollout

// Under a per-topology budget the available waiting members wait in one
// name-ordered heap per domain (Tracker.domainWaiting) instead of one
// for the fleet: a batch merges the heaps of the domains with room, so it
// moves the nodes update would move, in the same order, without passing
// over the nodes of the domains that have none.

// domainHead is the first waiting member of a domain with room, in
// moveByDomain's heap of heads.
type domainHead struct {
	name     string
	domain   uint32
	inFlight int
	limit    int
}

// moveByDomain moves available waiting members, in name order over the
// domains with room, while the canary room and the global budget (left
// unavailable slots, or surge pairs with surge) allow and each domain's
// budget does.
func (t *Tracker) moveByDomain(p *pass, room, unavailableLeft, surgeLeft int, surge bool, move func(i int32, surge bool)) {
	left := unavailableLeft
	if surge {
		left = surgeLeft
	}
	var heads []domainHead
	for d, sum := range t.sum.domains {
		if sum.waitingAvailable == 0 || sum.total == 0 {
			continue
		}
		h := domainHead{domain: uint32(d), inFlight: sum.unavailable, limit: p.domainLimit(sum.total)}
		if surge {
			h.inFlight = sum.surging
		}
		if h.inFlight >= h.limit {
			continue
		}
		if name, ok := t.peekDomain(h.domain); ok {
			h.name = name
			heads = append(heads, h)
		}
	}
	for k := len(heads)/2 - 1; k >= 0; k-- {
		downHeads(heads, k)
	}
	for room > 0 && left > 0 && len(heads) > 0 {
		h := &heads[0]
		i, _ := t.popDomain(h.domain)
		move(i, surge)
		room, left = room-1, left-1
		h.inFlight++
		name, ok := "", false
		if h.inFlight < h.limit {
			name, ok = t.peekDomain(h.domain)
		}
		if ok {
			h.name = name
		} else {
			last := len(heads) - 1
			heads[0] = heads[last]
			heads = heads[:last]
		}
		downHeads(heads, 0)
	}
}

func downHeads(h []domainHead, k int) {
	for {
		child := 2*k + 1
		if child >= len(h) {
			return
		}
		if right := child + 1; right < len(h) && h[right].name < h[child].name {
			child = right
		}
		if h[k].name <= h[child].name {
			return
		}
		h[k], h[child] = h[child], h[k]
		k = child
	}
}

// domainHeap is domain d's heap, grown as domains appear.
func (t *Tracker) domainHeap(d uint32) *[]string {
	for int(d) >= len(t.domainWaiting) {
		t.domainWaiting = append(t.domainWaiting, nil)
	}
	return &t.domainWaiting[d]
}

// peekDomain drops the stale entries at the top of domain d's heap and
// returns the name of its first member still waiting there.
func (t *Tracker) peekDomain(d uint32) (string, bool) {
	h := t.domainHeap(d)
	for len(*h) > 0 {
		name := (*h)[0]
		if i, ok := t.index.find(t.members, name); ok {
			m := &t.members[i]
			switch {
			case m.waiting&flagWaitingAvailable == 0 || m.part.domain != d:
				// a duplicate already taken, or it moved to another domain
			case m.part.flags&flagWaitingAvailable == 0:
				m.waiting &^= flagWaitingAvailable // no longer waits
			default:
				return name, true
			}
		}
		popName(h)
	}
	return "", false
}

// popDomain removes and returns domain d's first waiting member.
func (t *Tracker) popDomain(d uint32) (int32, bool) {
	name, ok := t.peekDomain(d)
	if !ok {
		return 0, false
	}
	popName(t.domainHeap(d))
	i, _ := t.index.find(t.members, name)
	t.members[i].waiting &^= flagWaitingAvailable
	return i, true
}

func popName(h *[]string) {
	last := len(*h) - 1
	(*h)[0] = (*h)[last]
	*h = (*h)[:last]
	downNames(*h, 0)
}
