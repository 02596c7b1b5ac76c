package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Profile is one simulated device as sampled from a Shape.
type Profile struct {
	// Index is the device's position in the fleet.
	Index int
	// Labels and Taints are announced in the device's status.
	Labels map[string]string
	Taints []schema.Taint
	// StartLatency delays every container start on the device.
	StartLatency time.Duration
	// ReadinessDelay fails exec readiness probes this long after a start.
	ReadinessDelay time.Duration
	// CrashAfter is how long a crash-looping container runs.
	CrashAfter time.Duration
	// Flaps and Offline select the device's link schedule.
	Flaps, Offline bool
	// OfflineAfter is how long an Offline device stays connected.
	OfflineAfter time.Duration
	// NoPrefetch: the device's agent does not announce prefetching.
	NoPrefetch bool
	// LinkBytesPerSecond and ImageSize model its pulls (Behaviour).
	LinkBytesPerSecond int64

	seed                  uint64
	pullFailure, crashing float64
	imageSizes            map[string]int64
	defaultImageSize      int64
}

// Profile samples device i. It is a pure function of the Shape's Seed and
// i: the same device gets the same profile in a fleet of any size.
func (s Shape) Profile(i int) Profile {
	rng := deviceRand(s.Seed, i, 0)
	p := Profile{Index: i, seed: s.Seed, pullFailure: s.Behaviour.ImagePullFailure, crashing: s.Behaviour.CrashLoop}
	p.Labels = make(map[string]string, len(s.Labels))
	for _, key := range sortedKeys(s.Labels) {
		if v, ok := pick(s.Labels[key], rng.Float64()); ok {
			p.Labels[key] = v
		}
	}
	for _, t := range s.Taints {
		if rng.Float64() < t.Probability {
			p.Taints = append(p.Taints, schema.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	b := s.Behaviour
	p.StartLatency = b.StartLatency.Sample(rng)
	p.ReadinessDelay = b.ReadinessDelay.Sample(rng)
	p.CrashAfter = b.CrashAfter.Sample(rng)
	p.Flaps = rng.Float64() < b.Flapping.Probability
	p.Offline = rng.Float64() < b.Offline
	p.OfflineAfter = b.OfflineAfter.Sample(rng)
	p.NoPrefetch = b.NoPrefetch > 0 && chance(s.Seed, i, "noprefetch", "") < b.NoPrefetch
	p.LinkBytesPerSecond, p.imageSizes, p.defaultImageSize = b.LinkBytesPerSecond, b.ImageSizes, b.DefaultImageSize
	return p
}

// ImageSize is an image's size on the device's link, in bytes
// (Behaviour.ImageSizes, DefaultImageSize).
func (p Profile) ImageSize(image string) int64 {
	if n, ok := p.imageSizes[image]; ok {
		return n
	}
	return p.defaultImageSize
}

// PullFails reports whether pulling image fails on this device; the answer
// is fixed per device and image.
func (p Profile) PullFails(image string) bool {
	return p.pullFailure > 0 && chance(p.seed, p.Index, "pull", image) < p.pullFailure
}

// CrashLoops reports whether image crash-loops on this device; the answer
// is fixed per device and image.
func (p Profile) CrashLoops(image string) bool {
	return p.crashing > 0 && chance(p.seed, p.Index, "crash", image) < p.crashing
}

// pick returns the value whose cumulative probability interval (values in
// sorted order) holds u, or false when u falls in the unset remainder.
func pick(probs map[string]float64, u float64) (string, bool) {
	acc := 0.0
	for _, v := range sortedKeys(probs) {
		acc += probs[v]
		if u < acc {
			return v, true
		}
	}
	return "", false
}

// Sample draws a duration uniformly from [Min, Max].
func (r Range) Sample(rng *rand.Rand) time.Duration {
	lo, hi := time.Duration(r.Min), time.Duration(r.Max)
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// deviceRand is device i's random stream number stream.
func deviceRand(seed uint64, i int, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^stream<<56, uint64(i)))
}

// chance maps (seed, device, kind, item) to a fixed number in [0, 1).
func chance(seed uint64, i int, kind, item string) float64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(seed, 10) + "/" + strconv.Itoa(i) + "/" + kind + "/" + item))
	return float64(h.Sum64()>>11) / (1 << 53)
}
