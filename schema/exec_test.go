package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExecMessagesValidate(t *testing.T) {
	code := 0
	valid := []any{
		ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Command: []string{"cat", "/etc/x"}, TimeoutSeconds: 30},
		ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Cancel: true},
		ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Seq: 0, Stream: ExecStdout, Data: "x"},
		ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Seq: 3, EOF: true, ExitCode: &code},
	}
	for _, m := range valid {
		b, err := Encode(m)
		require.NoError(t, err)
		switch m.(type) {
		case ExecRequest:
			_, err = DecodeExecRequest(b)
		case ExecChunk:
			_, err = DecodeExecChunk(b)
		}
		assert.NoError(t, err, "%+v", m)
	}
	for _, tt := range []struct {
		m    ExecRequest
		want string
	}{
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent"}, "command"},
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Command: make([]string, MaxExecArgs+1)}, "command"},
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Command: []string{strings.Repeat("a", MaxExecArgBytes+1)}}, "command"},
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Command: []string{"x"}, Stdin: strings.Repeat("a", MaxExecStdinBytes+1)}, "stdin"},
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Command: []string{"x"}, TimeoutSeconds: MaxExecTimeoutSeconds + 1}, "timeoutSeconds"},
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a b", DaemonSet: "edge/agent", Command: []string{"x"}}, "id"},
		{ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Container: "Bad_Name", Command: []string{"x"}}, "container"},
	} {
		b, err := Encode(tt.m)
		require.NoError(t, err)
		_, err = DecodeExecRequest(b)
		require.Error(t, err, "%+v", tt.m)
		assert.Contains(t, err.Error(), tt.want)
	}
	for _, tt := range []struct {
		m    ExecChunk
		want string
	}{
		{ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Data: "x"}, "stream"},
		{ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", ExitCode: &code}, "eof"},
		{ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Stream: ExecStdout, Data: strings.Repeat("a", MaxExecChunkBytes+1)}, "data"},
		{ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Seq: -1}, "seq"},
	} {
		b, err := Encode(tt.m)
		require.NoError(t, err)
		_, err = DecodeExecChunk(b)
		require.Error(t, err, "%+v", tt.m)
		assert.Contains(t, err.Error(), tt.want)
	}
}
