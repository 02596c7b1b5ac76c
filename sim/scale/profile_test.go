package scale

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"reflect"
	"runtime/pprof"
	"slices"
	"testing"
)

// pb builds protobuf messages for the test profiles.
type pb []byte

func (b pb) key(num, wire int) pb { return binary.AppendUvarint(b, uint64(num)<<3|uint64(wire)) }

func (b pb) varint(num int, v uint64) pb { return binary.AppendUvarint(b.key(num, 0), v) }

func (b pb) bytes(num int, data []byte) pb {
	return append(binary.AppendUvarint(b.key(num, 2), uint64(len(data))), data...)
}

func (b pb) packed(num int, vs ...uint64) pb {
	var data []byte
	for _, v := range vs {
		data = binary.AppendUvarint(data, v)
	}
	return b.bytes(num, data)
}

// testProfile is a CPU profile of the given stacks (function names, leaf
// first; "a+b" is a location where a was inlined into b), each sample
// worth its value in milliseconds. Odd samples repeat their fields
// unpacked, as the runtime writes short lists.
func testProfile(t *testing.T, stacks [][]string, millis []int64) []byte {
	t.Helper()
	var p pb
	strs := map[string]uint64{"": 0}
	order := []string{""}
	str := func(s string) uint64 {
		if i, ok := strs[s]; ok {
			return i
		}
		strs[s] = uint64(len(order))
		order = append(order, s)
		return strs[s]
	}
	p = p.bytes(fieldProfileSampleType, pb{}.varint(fieldValueTypeType, str("samples")).varint(2, str("count")))
	p = p.bytes(fieldProfileSampleType, pb{}.varint(fieldValueTypeType, str("cpu")).varint(2, str("nanoseconds")))
	funcs := map[string]uint64{}
	var nextLoc uint64
	for i, stack := range stacks {
		var locs []uint64
		for _, frame := range stack {
			nextLoc++
			loc := pb{}.varint(fieldLocationID, nextLoc).varint(3, 0x1000+nextLoc) // an address, ignored
			for _, name := range splitInlined(frame) {
				id, ok := funcs[name]
				if !ok {
					id = uint64(len(funcs) + 1)
					funcs[name] = id
					p = p.bytes(fieldProfileFunction, pb{}.varint(fieldFunctionID, id).varint(fieldFunctionName, str(name)))
				}
				loc = loc.bytes(fieldLocationLine, pb{}.varint(fieldLineFunction, id).varint(2, 42))
			}
			p = p.bytes(fieldProfileLocation, loc)
			locs = append(locs, nextLoc)
		}
		s := pb{}
		if i%2 == 0 {
			s = s.packed(fieldSampleLocation, locs...).packed(fieldSampleValue, 1, uint64(millis[i]*1e6))
		} else {
			for _, l := range locs {
				s = s.varint(fieldSampleLocation, l)
			}
			s = s.varint(fieldSampleValue, 1).varint(fieldSampleValue, uint64(millis[i]*1e6))
		}
		p = p.bytes(fieldProfileSample, s)
	}
	p = p.bytes(12, []byte{}) // a field the split does not read
	for _, s := range order {
		p = p.bytes(fieldProfileStringTable, []byte(s))
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func splitInlined(frame string) []string {
	var names []string
	for len(frame) > 0 {
		i := bytes.IndexByte([]byte(frame), '+')
		if i < 0 {
			return append(names, frame)
		}
		names, frame = append(names, frame[:i]), frame[i+1:]
	}
	return names
}

const (
	mochi     = "github.com/mochi-mqtt/server/v2"
	packets   = "github.com/mochi-mqtt/server/v2/packets"
	ctlPkg    = "github.com/edgeset/edgeset/controller"
	reconcile = "github.com/edgeset/edgeset/controller/reconcile"
	hooks     = "github.com/edgeset/edgeset/broker"
)

func TestSplitProfileInnermostOwner(t *testing.T) {
	stacks := [][]string{
		// the controller publishing into mochi: broker time
		{"syscall.write", packets + ".(*Packet).PublishEncode", mochi + ".(*Server).publishToClient", ctlPkg + ".(*embedded).Publish"},
		// mochi's read loop delivering to the controller's handler: controller time
		{"encoding/json.Unmarshal", "github.com/edgeset/edgeset/schema.DecodeObserved", ctlPkg + ".(*Controller).onObserved", mochi + ".(*Server).processPublish"},
		// a pass: reconcile inlined into the controller's loop, generic sort under it
		{"slices.SortFunc[...]", reconcile + ".Plan+" + ctlPkg + ".(*Controller).pass", "runtime.goexit"},
		// bbolt under the broker's retained store; token check under its auth hook
		{"go.etcd.io/bbolt.(*Tx).Commit", hooks + ".(*retained).flush"},
		{"crypto/hmac.Equal", "github.com/edgeset/edgeset/credential.Verify", hooks + ".(*auth).OnConnectAuthenticate", mochi + ".(*Server).attachClient"},
		// no owner: the GC worker, and the benchmark host's forced GC
		{"runtime.scanobject", "runtime.gcBgMarkWorker"},
		{"runtime.GC", "github.com/edgeset/edgeset/sim/scale.gcHeap"},
		{},
	}
	millis := []int64{40, 30, 20, 10, 5, 15, 8, 2}
	got, err := SplitProfile(testProfile(t, stacks, millis))
	if err != nil {
		t.Fatal(err)
	}
	want := ProfileSplit{Seconds: 0.130, Parts: []PartShare{
		{Part: PartController, Seconds: 0.050, Packages: []PackageShare{{ctlPkg, 0.030}, {reconcile, 0.020}}},
		{Part: PartBroker, Seconds: 0.055, Packages: []PackageShare{{packets, 0.040}, {hooks, 0.015}}},
		{Part: PartOther, Seconds: 0.025, Packages: []PackageShare{{"runtime", 0.015}, {"github.com/edgeset/edgeset/sim/scale", 0.008}, {"(no stack)", 0.002}}},
	}}
	if !splitsEqual(got, want) {
		t.Errorf("SplitProfile:\n got %+v\nwant %+v", got, want)
	}
}

func splitsEqual(a, b ProfileSplit) bool {
	round := func(s ProfileSplit) ProfileSplit {
		r := func(x float64) float64 { return math.Round(x * 1e6) }
		s.Seconds = r(s.Seconds)
		parts := make([]PartShare, len(s.Parts))
		for i, p := range s.Parts {
			parts[i] = PartShare{Part: p.Part, Seconds: r(p.Seconds)}
			for _, pkg := range p.Packages {
				parts[i].Packages = append(parts[i].Packages, PackageShare{pkg.Package, r(pkg.Seconds)})
			}
		}
		s.Parts = parts
		return s
	}
	return reflect.DeepEqual(round(a), round(b))
}

func TestSplitProfileRejects(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"not a profile", []byte{0xff, 0xff}},
		{"bad gzip", []byte{0x1f, 0x8b, 0, 0}},
		{"truncated length", append(pb{}.key(fieldProfileSample, 2), 5, 1)},
		{"truncated varint", pb{}.key(fieldProfileSample, 0).key(0, 0)[:1]},
		{"fixed64 past the end", append(pb{}.key(9, 1), 1, 2)},
		{"no cpu sample type", pb{}.bytes(fieldProfileStringTable, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := SplitProfile(tc.data); err == nil {
				t.Error("SplitProfile succeeded, want an error")
			}
		})
	}
}

// TestSplitProfileOfRuntime decodes a profile the Go runtime wrote: the
// parts add up to the sampled total.
func TestSplitProfileOfRuntime(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("CPU profiling unavailable: %v", err)
	}
	x := 0.0
	for i := range 30_000_000 {
		x += math.Sqrt(float64(i))
	}
	pprof.StopCPUProfile()
	got, err := SplitProfile(buf.Bytes())
	if err != nil {
		t.Fatalf("SplitProfile of a runtime profile (sum %g): %v", x, err)
	}
	var sum float64
	for _, p := range got.Parts {
		sum += p.Seconds
	}
	if len(got.Parts) != 3 || math.Abs(sum-got.Seconds) > 1e-9 {
		t.Errorf("parts %+v add up to %g, want %g", got.Parts, sum, got.Seconds)
	}
	if other := got.Parts[2]; got.Seconds > 0 && !slices.ContainsFunc(other.Packages, func(p PackageShare) bool {
		return p.Package == "github.com/edgeset/edgeset/sim/scale"
	}) {
		t.Errorf("the test's own loop (sim/scale, other) is missing: %+v", got.Parts)
	}
}

func TestFuncPackage(t *testing.T) {
	tests := []struct{ name, want string }{
		{"runtime.mallocgc", "runtime"},
		{"github.com/mochi-mqtt/server/v2.(*Server).processPublish", "github.com/mochi-mqtt/server/v2"},
		{"github.com/edgeset/edgeset/controller.(*Controller).pass.func1", "github.com/edgeset/edgeset/controller"},
		{"slices.SortFunc[...]", "slices"},
		{"github.com/a/b.F[go.shape.*github.com/c/d.T]", "github.com/a/b"},
		{"main", "main"},
	}
	for _, tc := range tests {
		if got := funcPackage(tc.name); got != tc.want {
			t.Errorf("funcPackage(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
