package sim

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

func testShape(t *testing.T) Shape {
	t.Helper()
	s, err := ParseShape([]byte(`seed: 42
labels:
  site: {a: 0.5, b: 0.3}
  role: {gateway: 1}
taints:
- {key: dedicated, value: camera, effect: NoSchedule, probability: 0.1}
behaviour:
  startLatency: {min: 100ms, max: 300ms}
  imagePullFailure: 0.2
  crashLoop: 0.05
  flapping: {probability: 0.25}
  offline: 0.1
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestProfileIsDeterministic(t *testing.T) {
	s := testShape(t)
	for _, i := range []int{0, 1, 999, 123456} {
		if a, b := s.Profile(i), s.Profile(i); !reflect.DeepEqual(a, b) {
			t.Errorf("device %d: two samples differ: %+v vs %+v", i, a, b)
		}
	}
	other := s
	other.Seed = 43
	same := 0
	for i := range 200 {
		if reflect.DeepEqual(s.Profile(i).Labels, other.Profile(i).Labels) {
			same++
		}
	}
	if same == 200 {
		t.Error("a different seed gave the same labels to all 200 devices")
	}
}

// TestProfileDistribution samples 20,000 devices and checks every
// frequency against its probability within 5 standard deviations.
func TestProfileDistribution(t *testing.T) {
	s := testShape(t)
	const n = 20000
	counts := map[string]int{}
	for i := range n {
		p := s.Profile(i)
		counts["site="+p.Labels["site"]]++
		counts["role="+p.Labels["role"]]++
		if len(p.Taints) == 1 {
			counts["taint"]++
		}
		if p.Flaps {
			counts["flaps"]++
		}
		if p.Offline {
			counts["offline"]++
		}
		if p.PullFails("img:1") {
			counts["pullFails"]++
		}
		if p.CrashLoops("img:1") {
			counts["crashLoops"]++
		}
		if p.StartLatency < 100*time.Millisecond || p.StartLatency > 300*time.Millisecond {
			t.Fatalf("device %d start latency %s outside [100ms, 300ms]", i, p.StartLatency)
		}
	}
	want := map[string]float64{
		"site=a": 0.5, "site=b": 0.3, "site=": 0.2, "role=gateway": 1,
		"taint": 0.1, "flaps": 0.25, "offline": 0.1, "pullFails": 0.2, "crashLoops": 0.05,
	}
	for key, p := range want {
		got := float64(counts[key]) / n
		if sd := math.Sqrt(p * (1 - p) / n); math.Abs(got-p) > 5*sd+1e-9 {
			t.Errorf("%s: frequency %.4f, want %.2f ± %.4f", key, got, p, 5*sd)
		}
	}
}

func TestPerImageDecisionsAreStable(t *testing.T) {
	p := testShape(t).Profile(17)
	pull, crash := p.PullFails("a:1"), p.CrashLoops("b:2")
	for range 3 {
		if p.PullFails("a:1") != pull || p.CrashLoops("b:2") != crash {
			t.Fatal("per-image decision changed between calls")
		}
	}
	if (Profile{}).PullFails("a:1") || (Profile{}).CrashLoops("a:1") {
		t.Error("zero probabilities must never fail or crash")
	}
}

func TestRangeSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name   string
		r      Range
		lo, hi time.Duration
	}{
		{"zero", Range{}, 0, 0},
		{"fixed", Range{Min: Duration(time.Second)}, time.Second, time.Second},
		{"max below min means min", Range{Min: Duration(2 * time.Second), Max: Duration(time.Second)}, 2 * time.Second, 2 * time.Second},
		{"uniform", Range{Min: Duration(time.Millisecond), Max: Duration(5 * time.Millisecond)}, time.Millisecond, 5 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 1000 {
				if d := tc.r.Sample(rng); d < tc.lo || d > tc.hi {
					t.Fatalf("Sample = %s, want in [%s, %s]", d, tc.lo, tc.hi)
				}
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100..1, unsorted
	}
	got := percentiles(xs)
	want := Percentiles{Count: 100, P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Errorf("percentiles = %+v, want %+v", got, want)
	}
	if (percentiles(nil) != Percentiles{}) {
		t.Error("percentiles of nothing must be zero")
	}
}

// TestNoPrefetchFraction: about the fraction noPrefetch of the devices
// announce no prefetching, the others edgeset.io/prefetch=true.
func TestNoPrefetchFraction(t *testing.T) {
	s, err := ParseShape([]byte("seed: 9\nbehaviour: {noPrefetch: 0.25}\n"))
	if err != nil {
		t.Fatal(err)
	}
	old := 0
	for i := range 2000 {
		p := s.Profile(i)
		d := &device{name: "d", profile: p, up: make(chan struct{})}
		_, announced := d.status(t.Context()).Labels[schema.LabelPrefetch]
		if announced == p.NoPrefetch {
			t.Fatalf("device %d: NoPrefetch %v but prefetch label announced %v", i, p.NoPrefetch, announced)
		}
		if p.NoPrefetch {
			old++
		}
	}
	if old < 400 || old > 600 {
		t.Errorf("%d of 2000 devices without prefetch, want about 500", old)
	}
}
