package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fuzzWire checks a wire decoder on arbitrary input: it never panics, and a
// message it accepts re-encodes to bytes that decode again and re-encode
// identically (decode(encode(v)) == v, compared through the encoding so
// that equal times in different zones compare equal).
func fuzzWire[T any](f *testing.F, decode func([]byte) (T, error)) {
	for _, tc := range wireCases() {
		if b, err := os.ReadFile(goldenPath(tc.name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schemaVersion":1,"node":"a"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decode(b)
		if err != nil {
			return
		}
		enc, err := Encode(v)
		if err != nil {
			t.Fatalf("encode accepted message: %v", err)
		}
		v2, err := decode(enc)
		if err != nil {
			t.Fatalf("re-decode %s: %v", enc, err)
		}
		enc2, err := Encode(v2)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the message:\n%s\n%s", enc, enc2)
		}
	})
}

func FuzzDecodeNodeStatus(f *testing.F)          { fuzzWire(f, DecodeNodeStatus) }
func FuzzDecodePresence(f *testing.F)            { fuzzWire(f, DecodePresence) }
func FuzzDecodeDesiredState(f *testing.F)        { fuzzWire(f, DecodeDesiredState) }
func FuzzDecodeObservedState(f *testing.F)       { fuzzWire(f, DecodeObservedState) }
func FuzzDecodeNodeEvent(f *testing.F)           { fuzzWire(f, DecodeNodeEvent) }
func FuzzDecodeRevision(f *testing.F)            { fuzzWire(f, DecodeRevision) }
func FuzzDecodeConfigMapMessage(f *testing.F)    { fuzzWire(f, DecodeConfigMapMessage) }
func FuzzDecodeSecretMessage(f *testing.F)       { fuzzWire(f, DecodeSecretMessage) }
func FuzzDecodeSealedSecretMessage(f *testing.F) { fuzzWire(f, DecodeSealedSecretMessage) }
func FuzzDecodeExecRequest(f *testing.F)         { fuzzWire(f, DecodeExecRequest) }
func FuzzDecodeExecChunk(f *testing.F)           { fuzzWire(f, DecodeExecChunk) }
func FuzzDecodeExecInput(f *testing.F)           { fuzzWire(f, DecodeExecInput) }

// addFiles seeds f with every file matching pattern.
func addFiles(f *testing.F, pattern string) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files match %s", pattern)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzDecode checks that manifest decoding never panics, that every object
// it returns is valid (a Secret with its stringData merged), and that
// decoding is deterministic.
func FuzzDecode(f *testing.F) {
	addFiles(f, "testdata/manifests/*")
	addFiles(f, "testdata/upstream/*")
	addFiles(f, "testdata/config/*")
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, warns, err := Decode("fuzz.yaml", b)
		for _, o := range objs {
			if verr := validateObject(o); verr != nil {
				t.Fatalf("Decode returned an invalid %s: %v", o.Kind(), verr)
			}
			if o.Secret != nil && o.Secret.StringData != nil {
				t.Fatalf("Decode returned a Secret with stringData")
			}
		}
		objs2, warns2, err2 := Decode("fuzz.yaml", b)
		if (err == nil) != (err2 == nil) || len(objs) != len(objs2) || len(warns) != len(warns2) {
			t.Fatalf("decoding is not deterministic")
		}
	})
}

// validateObject validates a decoded object of any kind.
func validateObject(o Object) error {
	switch {
	case o.ConfigMap != nil:
		return ValidateConfigMap(o.ConfigMap)
	case o.Secret != nil:
		return ValidateSecret(o.Secret)
	}
	return ValidateDaemonSet(o.DaemonSet)
}

// FuzzDecodeNodes checks that node-file decoding never panics and that the
// nodes it returns pass the node checks.
func FuzzDecodeNodes(f *testing.F) {
	addFiles(f, "testdata/nodes/*")
	f.Fuzz(func(t *testing.T, b []byte) {
		nodes, err := DecodeNodes("fuzz.yaml", b)
		if err != nil && nodes != nil {
			t.Fatalf("nodes returned with an error")
		}
		for _, n := range nodes {
			var errs fieldErrors
			validateNodeName(&errs, "name", n.Name)
			validateNodeFields(&errs, edgesetNodeFields, &n)
			if len(errs) > 0 {
				t.Fatalf("invalid node returned: %v", errs.err())
			}
		}
	})
}

// FuzzParseQuantity checks that quantity parsing never panics and that
// Value and MilliValue agree whenever both succeed.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"100m", "1.5Gi", "1e3", "0.5", "-2k", "1E", "5E-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quantity(s)
		v, err := q.Value()
		if err != nil {
			return
		}
		m, err := q.MilliValue()
		if err != nil {
			return // a value that fits an int64 may overflow in milli units
		}
		// ceil(x) and ceil(1000x) agree: ceil(1000x) is in (1000(ceil(x)-1), 1000 ceil(x)].
		if m > v*1000 || m <= (v-1)*1000 {
			t.Fatalf("%q: Value %d inconsistent with MilliValue %d", s, v, m)
		}
	})
}
