package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestNameIndexAgreesWithMap adds and removes members at random, as
// Tracker.Set and Remove do (the last member moves into a removed one's
// place), and checks that the index finds exactly the members a map
// would.
func TestNameIndexAgreesWithMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		x := newNameIndex()
		var members []member
		want := map[string]int32{}
		for step := range 3000 {
			name := fmt.Sprint("node-", rng.IntN(300))
			i, ok := x.find(members, name)
			if j, had := want[name]; ok != had || ok && i != j {
				t.Fatalf("seed %d step %d: find(%s) = %d, %v; want %d, %v", seed, step, name, i, ok, j, had)
			}
			if !ok {
				members = append(members, member{name: name})
				x.add(members, int32(len(members)-1))
				want[name] = int32(len(members) - 1)
				continue
			}
			x.remove(members, i)
			delete(want, name)
			last := int32(len(members) - 1)
			if i != last {
				x.move(members, last, i)
				members[i] = members[last]
				want[members[i].name] = i
			}
			members = members[:last]
		}
		if x.n != len(members) {
			t.Fatalf("seed %d: %d indexed, %d members", seed, x.n, len(members))
		}
		for name, i := range want {
			if got, ok := x.find(members, name); !ok || got != i {
				t.Fatalf("seed %d: find(%s) = %d, %v; want %d", seed, name, got, ok, i)
			}
		}
	}
}
