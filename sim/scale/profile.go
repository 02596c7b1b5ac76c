package scale

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The parts a controller host's CPU time is split into.
const (
	PartController = "controller" // edgeset's controller packages
	PartBroker     = "broker"     // the embedded broker: mochi-mqtt and edgeset's broker hooks
	PartOther      = "other"      // no owner on the stack: GC workers, scheduler, profiler, debug listener
)

// ProfileSplit is a CPU profile of the controller host split by owner.
// Each sample belongs to the innermost frame of its stack that is
// controller or broker code, so the libraries they call (encoding/json,
// bbolt, net, syscalls, the runtime's allocator) count for the caller:
// a controller publish into mochi is broker time, a mochi read loop
// delivering a message to the controller's handler is controller time
// from the handler down. Samples with no such frame are PartOther, listed
// by the package of their outermost frame (the goroutine's entry).
type ProfileSplit struct {
	// Seconds is the CPU time the profile sampled.
	Seconds float64 `json:"seconds"`
	// Parts are controller, broker and other, in that order.
	Parts []PartShare `json:"parts"`
}

// PartShare is one part's CPU time and the packages that own it, largest
// first.
type PartShare struct {
	Part     string         `json:"part"`
	Seconds  float64        `json:"seconds"`
	Packages []PackageShare `json:"packages"`
}

// PackageShare is the CPU time owned by one package.
type PackageShare struct {
	Package string  `json:"package"`
	Seconds float64 `json:"seconds"`
}

// ReadProfileSplit reads the gzipped pprof CPU profile at path and
// splits it.
func ReadProfileSplit(path string) (ProfileSplit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ProfileSplit{}, err
	}
	split, err := SplitProfile(data)
	if err != nil {
		return split, fmt.Errorf("profile %s: %w", path, err)
	}
	return split, nil
}

// SplitProfile splits a pprof CPU profile (gzipped or not) by owner.
func SplitProfile(data []byte) (ProfileSplit, error) {
	p, err := decodeProfile(data)
	if err != nil {
		return ProfileSplit{}, err
	}
	byPkg := map[string]float64{} // keyed by part + " " + package
	var total float64
	for _, s := range p.samples {
		part, pkg := p.owner(s.stack)
		byPkg[part+" "+pkg] += s.seconds
		total += s.seconds
	}
	return newSplit(total, byPkg), nil
}

// newSplit orders the per-package figures into parts.
func newSplit(total float64, byPkg map[string]float64) ProfileSplit {
	split := ProfileSplit{Seconds: total}
	for _, part := range []string{PartController, PartBroker, PartOther} {
		share := PartShare{Part: part, Packages: []PackageShare{}}
		for key, sec := range byPkg {
			if p, pkg, _ := strings.Cut(key, " "); p == part {
				share.Seconds += sec
				share.Packages = append(share.Packages, PackageShare{Package: pkg, Seconds: sec})
			}
		}
		slices.SortFunc(share.Packages, func(a, b PackageShare) int {
			return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), strings.Compare(a.Package, b.Package))
		})
		split.Parts = append(split.Parts, share)
	}
	return split
}

// ownerPart returns the part whose code pkg is, or "" for a library
// (standard library, bbolt, edgeset's schema and credential packages) whose
// time counts for its caller. The benchmark's own host code (sim/scale:
// the debug listener, the forced GC of /heap) is PartOther.
func ownerPart(pkg string) string {
	const module = "github.com/edgeset/edgeset/"
	switch {
	case strings.HasPrefix(pkg, "github.com/mochi-mqtt/"),
		pkg == module+"broker", strings.HasPrefix(pkg, module+"broker/"):
		return PartBroker
	case pkg == module+"controller", strings.HasPrefix(pkg, module+"controller/"):
		return PartController
	case strings.HasPrefix(pkg, module+"sim/"):
		return PartOther
	}
	return ""
}

// funcPackage is the import path of a symbol name as pprof records it:
// "github.com/a/b.(*T).M" is in "github.com/a/b", "runtime.mallocgc" in
// "runtime"; type arguments ("F[...]") are ignored.
func funcPackage(name string) string {
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// profile is the part of a pprof profile the split needs.
type profile struct {
	samples []sample
	// funcs maps a location to its functions' names, innermost inlined
	// function first.
	funcs map[uint64][]string
}

type sample struct {
	stack   []uint64 // location ids, leaf first
	seconds float64
}

// owner returns the part and package owning a stack.
func (p *profile) owner(stack []uint64) (part, pkg string) {
	var outermost string
	for _, loc := range stack {
		for _, name := range p.funcs[loc] {
			pkg := funcPackage(name)
			if part := ownerPart(pkg); part != "" {
				return part, pkg
			}
			outermost = pkg
		}
	}
	if outermost == "" {
		outermost = "(no stack)"
	}
	return PartOther, outermost
}

// Field numbers of profile.proto (github.com/google/pprof) the split reads.
const (
	fieldProfileSampleType  = 1
	fieldProfileSample      = 2
	fieldProfileLocation    = 4
	fieldProfileFunction    = 5
	fieldProfileStringTable = 6

	fieldValueTypeType = 1

	fieldSampleLocation = 1
	fieldSampleValue    = 2

	fieldLocationID   = 1
	fieldLocationLine = 4
	fieldLineFunction = 1

	fieldFunctionID   = 1
	fieldFunctionName = 2
)

// rawProfile holds the messages of a profile before they are linked by
// id and string index.
type rawProfile struct {
	sampleTypes []int64 // string index of each value's type
	samples     []rawSample
	locations   map[uint64][]uint64 // location id: function ids
	functions   map[uint64]int64    // function id: name string index
	strings     []string
}

type rawSample struct {
	locations []uint64
	values    []int64
}

// decodeProfile decodes a pprof profile and keeps its CPU samples (the
// value of type "cpu", nanoseconds).
func decodeProfile(data []byte) (*profile, error) {
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
	}
	raw := rawProfile{locations: map[uint64][]uint64{}, functions: map[uint64]int64{}}
	if err := eachField(data, raw.field); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return raw.link()
}

// field decodes one top-level field of a Profile message.
func (raw *rawProfile) field(num int, v uint64, b []byte) error {
	switch num {
	case fieldProfileSampleType:
		return eachField(b, func(num int, v uint64, _ []byte) error {
			if num == fieldValueTypeType {
				raw.sampleTypes = append(raw.sampleTypes, int64(v))
			}
			return nil
		})
	case fieldProfileSample:
		var s rawSample
		err := eachField(b, func(num int, v uint64, b []byte) error {
			switch num {
			case fieldSampleLocation:
				return appendVarints(&s.locations, v, b)
			case fieldSampleValue:
				var vals []uint64
				err := appendVarints(&vals, v, b)
				for _, x := range vals {
					s.values = append(s.values, int64(x))
				}
				return err
			}
			return nil
		})
		raw.samples = append(raw.samples, s)
		return err
	case fieldProfileLocation:
		return raw.location(b)
	case fieldProfileFunction:
		var id uint64
		var name int64
		err := eachField(b, func(num int, v uint64, _ []byte) error {
			switch num {
			case fieldFunctionID:
				id = v
			case fieldFunctionName:
				name = int64(v)
			}
			return nil
		})
		raw.functions[id] = name
		return err
	case fieldProfileStringTable:
		raw.strings = append(raw.strings, string(b))
	}
	return nil
}

// location decodes a Location message: its id and its lines' functions.
func (raw *rawProfile) location(b []byte) error {
	var id uint64
	var funcs []uint64
	err := eachField(b, func(num int, v uint64, b []byte) error {
		switch num {
		case fieldLocationID:
			id = v
		case fieldLocationLine:
			return eachField(b, func(num int, v uint64, _ []byte) error {
				if num == fieldLineFunction {
					funcs = append(funcs, v)
				}
				return nil
			})
		}
		return nil
	})
	raw.locations[id] = funcs
	return err
}

// link resolves ids and string indexes into a profile of CPU samples.
func (raw *rawProfile) link() (*profile, error) {
	str := func(i int64) string {
		if i < 0 || int(i) >= len(raw.strings) {
			return ""
		}
		return raw.strings[i]
	}
	cpu := slices.IndexFunc(raw.sampleTypes, func(t int64) bool { return str(t) == "cpu" })
	if cpu < 0 {
		return nil, errors.New("no sample type \"cpu\": not a CPU profile")
	}
	p := &profile{funcs: map[uint64][]string{}}
	for loc, fids := range raw.locations {
		for _, fid := range fids {
			p.funcs[loc] = append(p.funcs[loc], str(raw.functions[fid]))
		}
	}
	for i, s := range raw.samples {
		if cpu >= len(s.values) {
			return nil, fmt.Errorf("sample %d: %d values, want at least %d", i, len(s.values), cpu+1)
		}
		p.samples = append(p.samples, sample{stack: s.locations, seconds: float64(s.values[cpu]) / 1e9})
	}
	return p, nil
}

// appendVarints appends a repeated varint field to dst: one value (v) or,
// packed, every varint in b.
func appendVarints(dst *[]uint64, v uint64, b []byte) error {
	if b == nil {
		*dst = append(*dst, v)
		return nil
	}
	for len(b) > 0 {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad packed varint")
		}
		*dst = append(*dst, x)
		b = b[n:]
	}
	return nil
}

// eachField calls fn for every field of the protobuf message msg with its
// number and either its varint value (wire type 0; b is nil) or its bytes
// (wire type 2; b is non-nil). Fixed-width fields (wire types 1 and 5),
// which no field the split reads uses, are skipped.
func eachField(msg []byte, fn func(num int, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return errors.New("bad field key")
		}
		msg = msg[n:]
		num, wire := int(key>>3), key&7
		var v uint64
		var b []byte
		switch wire {
		case 0:
			if v, n = binary.Uvarint(msg); n <= 0 {
				return fmt.Errorf("field %d: bad varint", num)
			}
		case 1:
			n = 8
		case 2:
			l, ln := binary.Uvarint(msg)
			if ln <= 0 || l > uint64(len(msg)-ln) {
				return fmt.Errorf("field %d: bad length", num)
			}
			b, n = msg[ln:ln+int(l)], ln+int(l) // non-nil: msg is not empty
		case 5:
			n = 4
		default:
			return fmt.Errorf("field %d: unsupported wire type %d", num, wire)
		}
		if n > len(msg) {
			return fmt.Errorf("field %d: truncated", num)
		}
		msg = msg[n:]
		if wire == 0 || wire == 2 {
			if err := fn(num, v, b); err != nil {
				return err
			}
		}
	}
	return nil
}
