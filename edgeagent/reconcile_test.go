package edgeagent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func managedContainer(id, ds, rev, idx string, running bool, created time.Time) ContainerState {
	return ContainerState{ID: id, Running: running, Created: created, Labels: map[string]string{
		LabelManaged: "true", LabelNode: "n", LabelDaemonSet: ds, LabelRevision: rev, LabelIndex: idx,
	}}
}

func initContainer(id, ds, rev, idx string, created time.Time) ContainerState {
	c := managedContainer(id, ds, rev, "", false, created)
	delete(c.Labels, LabelIndex)
	c.Labels[LabelInitIndex] = idx
	return c
}

func TestInventory(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	list := []ContainerState{
		managedContainer("young-running", "a/x", "r1", "0", true, t0.Add(time.Minute)),
		managedContainer("old-stopped", "a/x", "r1", "0", false, t0),
		managedContainer("old-running", "a/x", "r1", "0", true, t0.Add(time.Second)),
		managedContainer("follower", "a/x", "r1", "1", true, t0),
		managedContainer("no-index", "a/x", "r1", "", true, t0),
		managedContainer("no-rev", "a/x", "", "0", true, t0),
		managedContainer("other", "a/y", "r9", "0", false, t0),
		initContainer("setup", "a/x", "r1", "0", t0),
		initContainer("bad-init-index", "a/x", "r1", "-1", t0),
	}
	both := managedContainer("both-indexes", "a/x", "r1", "2", true, t0)
	both.Labels[LabelInitIndex] = "2"
	list = append(list, both)
	groups, surplus := inventory(list)
	x := groups[instanceKey{DaemonSet: "a/x", Revision: "r1"}]
	assert.Equal(t, "old-running", x[mainSlot(0)].ID, "oldest running duplicate kept")
	assert.Equal(t, "follower", x[mainSlot(1)].ID)
	assert.Equal(t, "setup", x[initSlot(0)].ID, "an init container has its own slot")
	assert.Equal(t, "other", groups[instanceKey{DaemonSet: "a/y", Revision: "r9"}][mainSlot(0)].ID)
	var ids []string
	for _, c := range surplus {
		ids = append(ids, c.ID)
	}
	assert.ElementsMatch(t, []string{"young-running", "old-stopped", "no-index", "no-rev", "bad-init-index", "both-indexes"}, ids)
}

func TestPlanLeftovers(t *testing.T) {
	key := func(ds, rev string) instanceKey { return instanceKey{DaemonSet: ds, Revision: rev} }
	running := containerGroup{mainSlot(0): {Running: true}}
	stopped := containerGroup{mainSlot(0): {Running: false}}
	tests := []struct {
		name       string
		desired    []instanceKey
		cached     []string
		groups     map[instanceKey]containerGroup
		keep, drop []instanceKey
	}{
		{
			name:    "desired instance is neither kept nor removed",
			desired: []instanceKey{key("a", "r1")}, cached: []string{"r1"},
			groups: map[instanceKey]containerGroup{key("a", "r1"): running},
		},
		{
			name:    "removed daemonset",
			desired: []instanceKey{key("a", "r1")}, cached: []string{"r1"},
			groups: map[instanceKey]containerGroup{key("a", "r1"): running, key("b", "r5"): running},
			drop:   []instanceKey{key("b", "r5")},
		},
		{
			name:    "old revision removed once the new template is here",
			desired: []instanceKey{key("a", "r2")}, cached: []string{"r2"},
			groups: map[instanceKey]containerGroup{key("a", "r1"): running},
			drop:   []instanceKey{key("a", "r1")},
		},
		{
			name:    "old revision kept while the new template is awaited",
			desired: []instanceKey{key("a", "r2")},
			groups:  map[instanceKey]containerGroup{key("a", "r1"): running},
			keep:    []instanceKey{key("a", "r1")},
		},
		{
			name:    "only one old revision kept, the running one",
			desired: []instanceKey{key("a", "r3")},
			groups:  map[instanceKey]containerGroup{key("a", "r1"): stopped, key("a", "r2"): running, key("a", "r0"): running},
			keep:    []instanceKey{key("a", "r0")},
			drop:    []instanceKey{key("a", "r1"), key("a", "r2")},
		},
		{
			name:    "surge with one template missing does not keep a third revision",
			desired: []instanceKey{key("a", "r1"), key("a", "r2")}, cached: []string{"r1"},
			groups: map[instanceKey]containerGroup{key("a", "r1"): running, key("a", "r0"): running},
			drop:   []instanceKey{key("a", "r0")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			has := func(h string) bool {
				for _, c := range tc.cached {
					if c == h {
						return true
					}
				}
				return false
			}
			keep, drop := planLeftovers(tc.desired, has, tc.groups)
			assert.Equal(t, tc.keep, keep, "keep")
			assert.Equal(t, tc.drop, drop, "remove")
		})
	}
}

func TestStopOrder(t *testing.T) {
	g := containerGroup{mainSlot(0): {}, mainSlot(2): {}, mainSlot(1): {}, initSlot(0): {}, initSlot(3): {}, initSlot(1): {}}
	assert.Equal(t, []slot{mainSlot(2), mainSlot(1), mainSlot(0), initSlot(3), initSlot(1), initSlot(0)}, g.stopOrder(),
		"main containers first, followers before their owner, then sidecars in reverse order")
	assert.Equal(t, []slot{}, containerGroup{}.stopOrder())
}
