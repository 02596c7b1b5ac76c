package decider

import (
	"fmt"
	"testing"

	"github.com/edgeset/edgeset/schema"
)

func TestInstanceListsShareEqualLists(t *testing.T) {
	l := newInstanceLists()
	list := func(rev string) []schema.DesiredInstance {
		return []schema.DesiredInstance{{DaemonSet: "fleet/a", Revision: rev}, {DaemonSet: "fleet/b", Revision: "r1"}}
	}
	first := l.intern(list("r1"))
	if got := l.intern(list("r1")); &got[0] != &first[0] {
		t.Error("an equal list is not shared")
	}
	if got := l.intern(list("r2")); &got[0] == &first[0] || got[0].Revision != "r2" {
		t.Errorf("another list is shared: %v", got)
	}
	locked := list("r1")
	locked[0].OverrideUpdateLock = "2026-12-03T18:00:00Z"
	if got := l.intern(locked); &got[0] == &first[0] {
		t.Error("a list with a lock override is shared with one without")
	}
	if got := l.intern(nil); got != nil {
		t.Errorf("intern(nil) = %v", got)
	}
	for i := range maxInternedLists {
		l.intern(list(fmt.Sprint("x", i)))
	}
	if len(l.lists) > maxInternedLists {
		t.Errorf("%d lists remembered, at most %d", len(l.lists), maxInternedLists)
	}
}
