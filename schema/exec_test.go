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

func TestInteractiveExecRequestValidate(t *testing.T) {
	base := func(edit func(*ExecRequest)) ExecRequest {
		r := ExecRequest{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", DaemonSet: "edge/agent", Command: []string{"sh"}}
		edit(&r)
		return r
	}
	for _, tt := range []struct {
		name string
		m    ExecRequest
		want string // "" for valid
	}{
		{"stdin stream", base(func(r *ExecRequest) { r.StdinStream = true }), ""},
		{"terminal with size and idle timeout", base(func(r *ExecRequest) {
			r.StdinStream, r.TTY, r.Width, r.Height, r.IdleTimeoutSeconds = true, true, 120, 40, 60
		}), ""},
		{"terminal alone", base(func(r *ExecRequest) { r.TTY = true }), ""},
		{"stdin twice", base(func(r *ExecRequest) { r.StdinStream, r.Stdin = true, "x" }), "stdin: must be empty with stdinStream"},
		{"size without terminal", base(func(r *ExecRequest) { r.StdinStream, r.Width = true, 80 }), "width: set without tty"},
		{"size too large", base(func(r *ExecRequest) { r.TTY, r.Height = true, MaxTerminalSize+1 }), "height: must be between 0 and"},
		{"negative size", base(func(r *ExecRequest) { r.TTY, r.Width = true, -1 }), "width: must be between 0 and"},
		{"idle without input", base(func(r *ExecRequest) { r.IdleTimeoutSeconds = 10 }), "idleTimeoutSeconds: set without"},
		{"idle too long", base(func(r *ExecRequest) { r.TTY, r.IdleTimeoutSeconds = true, MaxExecTimeoutSeconds+1 }), "idleTimeoutSeconds: must be between"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.m)
			require.NoError(t, err)
			got, err := DecodeExecRequest(b)
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.m, got)
				assert.True(t, got.Interactive())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	ready := ExecChunk{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Ready: true}
	b, err := Encode(ready)
	require.NoError(t, err)
	_, err = DecodeExecChunk(b)
	require.NoError(t, err)
	ready.Seq = 1
	b, err = Encode(ready)
	require.NoError(t, err)
	_, err = DecodeExecChunk(b)
	require.ErrorContains(t, err, "ready: only on the first chunk")
}

func TestExecInputValidate(t *testing.T) {
	in := func(edit func(*ExecInput)) ExecInput {
		m := ExecInput{SchemaVersion: WireVersion, Node: "pi-01", ID: "a1", Seq: 2, Data: []byte("ls\r")}
		edit(&m)
		return m
	}
	for _, tt := range []struct {
		name string
		m    ExecInput
		want string
	}{
		{"data", in(func(*ExecInput) {}), ""},
		{"binary data", in(func(m *ExecInput) { m.Data = []byte{0xff, 0x00, 0x04} }), ""},
		{"eof alone", in(func(m *ExecInput) { m.Data, m.EOF = nil, true }), ""},
		{"resize alone", in(func(m *ExecInput) { m.Data, m.Resize = nil, &TerminalSize{Width: 80, Height: 24} }), ""},
		{"largest chunk", in(func(m *ExecInput) { m.Data = make([]byte, MaxExecInputChunkBytes) }), ""},
		{"empty", in(func(m *ExecInput) { m.Data = nil }), "data: required unless eof or resize"},
		{"too large", in(func(m *ExecInput) { m.Data = make([]byte, MaxExecInputChunkBytes+1) }), "data: 8193 bytes, limit 8192"},
		{"zero size", in(func(m *ExecInput) { m.Resize = &TerminalSize{Width: 0, Height: 24} }), "resize.width"},
		{"huge size", in(func(m *ExecInput) { m.Resize = &TerminalSize{Width: 80, Height: MaxTerminalSize + 1} }), "resize.height"},
		{"negative seq", in(func(m *ExecInput) { m.Seq = -1 }), "seq"},
		{"bad id", in(func(m *ExecInput) { m.ID = "a/+" }), "id"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.m)
			require.NoError(t, err)
			got, err := DecodeExecInput(b)
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.m, got, "binary data survives the round trip")
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestExecInputTopic(t *testing.T) {
	topic := ExecInputTopic("pi-01.site", "5e0c_x-1")
	assert.Equal(t, "edgeset/v1/nodes/pi-01.site/exec/input/5e0c_x-1", topic)
	node, id, ok := ParseExecInputTopic(topic)
	assert.True(t, ok)
	assert.Equal(t, "pi-01.site", node)
	assert.Equal(t, "5e0c_x-1", id)
	for _, bad := range []string{
		"edgeset/v1/nodes/pi-01/exec/input/", "edgeset/v1/nodes/pi-01/exec/input/+", "edgeset/v1/nodes/pi-01/exec/input/a/b",
		"edgeset/v1/nodes/pi-01/exec/request", "edgeset/v1/nodes//exec/input/a", "edgeset/v1/revisions/a",
	} {
		_, _, ok := ParseExecInputTopic(bad)
		assert.False(t, ok, bad)
	}
}
