package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgeset/edgeset/schema"
)

// Shape is the fleet YAML: how labels and taints are distributed over the
// simulated devices and how the devices behave. The zero Shape is a fleet
// of identical, well-behaved devices with no labels beyond the hostname.
type Shape struct {
	// Seed makes sampling reproducible: device i's profile depends only on
	// Seed and i, never on the fleet size.
	Seed uint64 `yaml:"seed"`
	// Labels maps a label key to the probability of each value. The
	// probabilities of one key sum to at most 1; the rest leaves the label
	// unset. Example: site: {a: 0.5, b: 0.5}.
	Labels map[string]map[string]float64 `yaml:"labels"`
	// Taints are added to a device each with its own probability.
	Taints []TaintShape `yaml:"taints"`
	// Behaviour is how devices misbehave.
	Behaviour Behaviour `yaml:"behaviour"`
}

// TaintShape is a taint carried by a fraction of the devices.
type TaintShape struct {
	Key         string  `yaml:"key"`
	Value       string  `yaml:"value"`
	Effect      string  `yaml:"effect"`
	Probability float64 `yaml:"probability"`
}

// Behaviour is the misbehaviour of the simulated devices. Probabilities are
// in [0, 1]; ranges are sampled uniformly.
type Behaviour struct {
	// StartLatency is how long each container start takes on a device
	// (sampled once per device).
	StartLatency Range `yaml:"startLatency"`
	// ReadinessDelay is how long an exec readiness probe fails after its
	// container started (sampled once per device). A daemonset without a
	// readiness probe is ready as soon as it runs.
	ReadinessDelay Range `yaml:"readinessDelay"`
	// ImagePullFailure is the probability that pulling an image fails on a
	// device, decided once per device and image.
	ImagePullFailure float64 `yaml:"imagePullFailure"`
	// CrashLoop is the probability that an image crash-loops on a device
	// (decided once per device and image): each run exits with code 1
	// after CrashAfter.
	CrashLoop float64 `yaml:"crashLoop"`
	// CrashAfter is how long a crash-looping container runs; default 5s.
	CrashAfter Range `yaml:"crashAfter"`
	// Flapping makes a fraction of the devices lose their link repeatedly.
	Flapping Flapping `yaml:"flapping"`
	// Offline is the fraction of devices that connect, then lose their link
	// for good after OfflineAfter (the broker publishes their will).
	Offline float64 `yaml:"offline"`
	// OfflineAfter is how long a permanently offline device stays
	// connected first; default 5s.
	OfflineAfter Range `yaml:"offlineAfter"`
	// PreloadedImages are present on every device from the start (for
	// imagePullPolicy: Never).
	PreloadedImages []string `yaml:"preloadedImages"`
	// LinkBytesPerSecond is each device's link speed for image pulls; with
	// image sizes (ImageSizes, DefaultImageSize) a pull takes an image's
	// size over it, one transfer at a time per device, resumed where an
	// interrupted one stopped. Zero (or no sizes) pulls at once.
	LinkBytesPerSecond int64 `yaml:"linkBytesPerSecond"`
	// ImageSizes are images' sizes in bytes; DefaultImageSize is the
	// others'.
	ImageSizes       map[string]int64 `yaml:"imageSizes"`
	DefaultImageSize int64            `yaml:"defaultImageSize"`
	// NoPrefetch is the fraction of devices whose agent does not announce
	// edgeset.io/prefetch, as one built before download before switch: a
	// rollout switches them without asking them to prefetch.
	NoPrefetch float64 `yaml:"noPrefetch"`
}

// Flapping is a link that fails every Every and stays down for Down.
type Flapping struct {
	Probability float64 `yaml:"probability"`
	// Every is the link's up time between failures; default 60s.
	Every Range `yaml:"every"`
	// Down is how long each failure lasts; default 10s.
	Down Range `yaml:"down"`
}

// Range is a uniform distribution of durations; a Max below Min (or unset)
// means exactly Min.
type Range struct {
	Min Duration `yaml:"min"`
	Max Duration `yaml:"max"`
}

// Duration is a time.Duration written as in Go ("250ms", "1m30s").
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as 250ms: %w", n.Line, err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 250ms", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// Default ranges of Behaviour.
var (
	DefaultCrashAfter   = Range{Min: Duration(5 * time.Second)}
	DefaultOfflineAfter = Range{Min: Duration(5 * time.Second)}
	DefaultFlapEvery    = Range{Min: Duration(60 * time.Second)}
	DefaultFlapDown     = Range{Min: Duration(10 * time.Second)}
)

// LoadShape reads and parses the fleet YAML at path.
func LoadShape(path string) (Shape, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Shape{}, fmt.Errorf("fleet file: %w", err)
	}
	s, err := ParseShape(data)
	if err != nil {
		return Shape{}, fmt.Errorf("fleet file %s: %w", path, err)
	}
	return s, nil
}

// ParseShape parses fleet YAML strictly (an unknown key is an error naming
// it), applies the defaults and validates every field, reporting all
// problems at once, each with its key path.
func ParseShape(data []byte) (Shape, error) {
	var s Shape
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return Shape{}, err
	}
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return Shape{}, err
	}
	return s, nil
}

func (s *Shape) applyDefaults() {
	b := &s.Behaviour
	setRange(&b.CrashAfter, DefaultCrashAfter)
	setRange(&b.OfflineAfter, DefaultOfflineAfter)
	setRange(&b.Flapping.Every, DefaultFlapEvery)
	setRange(&b.Flapping.Down, DefaultFlapDown)
}

func setRange(r *Range, def Range) {
	if *r == (Range{}) {
		*r = def
	}
}

// Validate reports every invalid field of s, each named by its key path.
func (s Shape) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	for _, key := range sortedKeys(s.Labels) {
		s.validateLabel(key, bad)
	}
	for i, t := range s.Taints {
		field := fmt.Sprintf("taints[%d]", i)
		checkProbability(bad, field+".probability", t.Probability)
		st := schema.NodeStatus{SchemaVersion: schema.WireVersion, Node: "n", Taints: []schema.Taint{{Key: t.Key, Value: t.Value, Effect: t.Effect}}}
		if err := decodeCheck(st); err != nil {
			bad(field, "%v", err)
		}
	}
	b := s.Behaviour
	checkProbability(bad, "behaviour.imagePullFailure", b.ImagePullFailure)
	checkProbability(bad, "behaviour.crashLoop", b.CrashLoop)
	checkProbability(bad, "behaviour.offline", b.Offline)
	checkProbability(bad, "behaviour.flapping.probability", b.Flapping.Probability)
	checkProbability(bad, "behaviour.noPrefetch", b.NoPrefetch)
	if b.LinkBytesPerSecond < 0 {
		bad("behaviour.linkBytesPerSecond", "must not be negative, not %d", b.LinkBytesPerSecond)
	}
	if b.DefaultImageSize < 0 {
		bad("behaviour.defaultImageSize", "must not be negative, not %d", b.DefaultImageSize)
	}
	for _, image := range sortedKeys(b.ImageSizes) {
		if b.ImageSizes[image] < 0 {
			bad("behaviour.imageSizes."+image, "must not be negative, not %d", b.ImageSizes[image])
		}
	}
	for _, r := range []struct {
		key string
		r   Range
	}{
		{"behaviour.startLatency", b.StartLatency}, {"behaviour.readinessDelay", b.ReadinessDelay},
		{"behaviour.crashAfter", b.CrashAfter}, {"behaviour.offlineAfter", b.OfflineAfter},
		{"behaviour.flapping.every", b.Flapping.Every}, {"behaviour.flapping.down", b.Flapping.Down},
	} {
		if r.r.Min < 0 || r.r.Max < 0 {
			bad(r.key, "durations must not be negative")
		}
	}
	if b.Flapping.Probability > 0 && b.Flapping.Every.Min <= 0 {
		bad("behaviour.flapping.every", "min must be positive")
	}
	return errors.Join(errs...)
}

// validateLabel checks one label key's values (through the wire schema, so
// the controller would accept them) and its probabilities.
func (s Shape) validateLabel(key string, bad func(string, string, ...any)) {
	field := "labels." + key
	sum := 0.0
	for _, v := range sortedKeys(s.Labels[key]) {
		p := s.Labels[key][v]
		checkProbability(bad, fmt.Sprintf("%s.%s", field, v), p)
		sum += p
		st := schema.NodeStatus{SchemaVersion: schema.WireVersion, Node: "n", Labels: map[string]string{key: v}}
		if err := decodeCheck(st); err != nil {
			bad(field, "%v", err)
		}
	}
	if sum > 1+1e-9 {
		bad(field, "probabilities sum to %.4g, want at most 1", sum)
	}
}

// decodeCheck runs st through the controller's wire validation.
func decodeCheck(st schema.NodeStatus) error {
	b, err := schema.Encode(st)
	if err != nil {
		return err
	}
	_, err = schema.DecodeNodeStatus(b)
	return err
}

func checkProbability(bad func(string, string, ...any), key string, p float64) {
	if math.IsNaN(p) || p < 0 || p > 1 {
		bad(key, "probability %g is not in [0, 1]", p)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
