package schema

import (
	"strings"
	"testing"
)

func TestLogMessagesRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		msg    any
		decode func([]byte) (any, error)
	}{
		{"request", LogRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1b2", DaemonSet: "edge/agent", Container: "main", Tail: 50, Follow: true, MaxBytes: 4096}, decoderFor(DecodeLogRequest)},
		{"request-previous", LogRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "p1", DaemonSet: "edge/agent", Tail: 20, Previous: true}, decoderFor(DecodeLogRequest)},
		{"request-minimal", LogRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "x", DaemonSet: "edge/agent"}, decoderFor(DecodeLogRequest)},
		{"cancel", LogRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1b2", Cancel: true}, decoderFor(DecodeLogRequest)},
		{"chunk", LogChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1b2", Seq: 3, Data: "hello\nwörld\n"}, decoderFor(DecodeLogChunk)},
		{"chunk-eof", LogChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1b2", Seq: 4, EOF: true}, decoderFor(DecodeLogChunk)},
		{"chunk-error", LogChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1b2", EOF: true, Error: "no instance of daemonset edge/agent on this node"}, decoderFor(DecodeLogChunk)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.decode(b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if got != tc.msg {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.msg)
			}
		})
	}
}

func TestLogMessagesRejected(t *testing.T) {
	cases := []struct {
		name    string
		payload string
		decode  func([]byte) (any, error)
		field   string
	}{
		{"request without id", `{"schemaVersion":1,"node":"a","daemonSet":"d/x"}`, decoderFor(DecodeLogRequest), "id"},
		{"request id with slash", `{"schemaVersion":1,"node":"a","id":"a/b","daemonSet":"d/x"}`, decoderFor(DecodeLogRequest), "id"},
		{"request without daemonset", `{"schemaVersion":1,"node":"a","id":"r"}`, decoderFor(DecodeLogRequest), "daemonSet"},
		{"request bad container", `{"schemaVersion":1,"node":"a","id":"r","daemonSet":"d/x","container":"A_B"}`, decoderFor(DecodeLogRequest), "container"},
		{"request negative tail", `{"schemaVersion":1,"node":"a","id":"r","daemonSet":"d/x","tail":-1}`, decoderFor(DecodeLogRequest), "tail"},
		{"request too many bytes", `{"schemaVersion":1,"node":"a","id":"r","daemonSet":"d/x","maxBytes":9999999999}`, decoderFor(DecodeLogRequest), "maxBytes"},
		{"request unknown field", `{"schemaVersion":1,"node":"a","id":"r","daemonSet":"d/x","lines":3}`, decoderFor(DecodeLogRequest), "lines"},
		{"request wrong version", `{"schemaVersion":2,"node":"a","id":"r","daemonSet":"d/x"}`, decoderFor(DecodeLogRequest), "schemaVersion"},
		{"chunk negative seq", `{"schemaVersion":1,"node":"a","id":"r","seq":-1}`, decoderFor(DecodeLogChunk), "seq"},
		{"chunk error without eof", `{"schemaVersion":1,"node":"a","id":"r","seq":0,"error":"boom"}`, decoderFor(DecodeLogChunk), "eof"},
		{"chunk too large", `{"schemaVersion":1,"node":"a","id":"r","seq":0,"data":"` + strings.Repeat("x", MaxLogChunkBytes+1) + `"}`, decoderFor(DecodeLogChunk), "data"},
		{"chunk without node", `{"schemaVersion":1,"id":"r","seq":0}`, decoderFor(DecodeLogChunk), "node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.decode([]byte(tc.payload))
			if err == nil {
				t.Fatalf("accepted %s", tc.payload)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestParseNodeTopicLogs(t *testing.T) {
	for _, kind := range []string{TopicLogsRequest, TopicLogsResponse} {
		node, got, ok := ParseNodeTopic(NodeTopic("pi-01", kind))
		if !ok || node != "pi-01" || got != kind {
			t.Errorf("ParseNodeTopic(%s) = %q, %q, %v", NodeTopic("pi-01", kind), node, got, ok)
		}
	}
	if _, _, ok := ParseNodeTopic(NodeTopic("pi-01", "logs/other")); ok {
		t.Error("ParseNodeTopic accepted an unknown two-level kind")
	}
}

func FuzzDecodeLogRequest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"node":"a","id":"r","daemonSet":"d/x","container":"c","tail":5,"follow":true,"maxBytes":10}`))
	f.Add([]byte(`{"schemaVersion":1,"node":"a","id":"r","cancel":true}`))
	f.Add([]byte(`{"schemaVersion":1,"node":"a","id":"r","daemonSet":"d/x","previous":true}`))
	fuzzWire(f, DecodeLogRequest)
}

func FuzzDecodeLogChunk(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"node":"a","id":"r","seq":2,"data":"line\n\u00e9","eof":true}`))
	f.Add([]byte(`{"schemaVersion":1,"node":"a","id":"r","seq":0,"eof":true,"error":"no instance"}`))
	fuzzWire(f, DecodeLogChunk)
}
