package schema

import "strings"

// Bounds of an interactive exec session's input (edgesetctl exec -i/-t).
const (
	// MaxExecInputChunkBytes bounds one ExecInput's Data.
	MaxExecInputChunkBytes = 8 << 10
	// ExecInputBytesPerSecond is the rate the controller paces a
	// session's input to, ExecInputBurstBytes the burst it allows; each
	// chunk costs its data's length, and at least ExecInputChunkCost (so
	// empty chunks, resizes, are bounded too: at most 256 a second).
	ExecInputBytesPerSecond = 64 << 10
	ExecInputBurstBytes     = 64 << 10
	ExecInputChunkCost      = 256
	// MaxExecInputPending bounds the chunks an agent holds for one
	// session: arrived out of order, or waiting for the process to read
	// its input. Past it the session ends: input is never dropped.
	MaxExecInputPending = 64
	// DefaultExecIdleTimeoutSeconds ends an interactive session without
	// input or output for this long, unless the request says otherwise.
	DefaultExecIdleTimeoutSeconds = 600
	// MaxTerminalSize bounds a terminal's width and height.
	MaxTerminalSize = 10000
)

// TopicExecInputPrefix is the kind prefix of an interactive exec session's
// input topic: edgeset/v1/nodes/{node}/exec/input/{id}. Only that node
// may read it, one session (an exact id, no wildcard) at a time.
const TopicExecInputPrefix = "exec/input/"

// ExecInputTopic returns the input topic of node's exec session id.
func ExecInputTopic(node, id string) string {
	return NodeTopic(node, TopicExecInputPrefix+id)
}

// ParseExecInputTopic returns the node and session id of an exec input
// topic; ok is false for any other topic.
func ParseExecInputTopic(topic string) (node, id string, ok bool) {
	rest, found := strings.CutPrefix(topic, TopicPrefix+"nodes/")
	if !found {
		return "", "", false
	}
	node, kind, found := strings.Cut(rest, "/")
	if !found || node == "" {
		return "", "", false
	}
	id, found = strings.CutPrefix(kind, TopicExecInputPrefix)
	if !found || !ValidStreamID(id) {
		return "", "", false
	}
	return node, id, true
}

// ValidStreamID reports whether id is a valid log or exec stream id: 1 to
// 64 letters, digits, '-' or '_' (so one topic level without wildcards).
func ValidStreamID(id string) bool { return logIDRE.MatchString(id) }

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// ExecInput is one chunk of an interactive exec session's input,
// published by the controller on the session's input topic
// (ExecInputTopic) at QoS 1, not retained. Seq counts from 0 without
// gaps; the agent puts chunks back in order, drops a repeated one, and
// ends the session when one is lost. A chunk carries Data for the
// command's standard input (bytes; base64 in JSON), EOF to close it,
// Resize to resize the terminal, or several of these, applied in that
// order.
type ExecInput struct {
	SchemaVersion int           `json:"schemaVersion"`
	Node          string        `json:"node"`
	ID            string        `json:"id"`
	Seq           int           `json:"seq"`
	Data          []byte        `json:"data,omitempty"`
	EOF           bool          `json:"eof,omitempty"`
	Resize        *TerminalSize `json:"resize,omitempty"`
}

// DecodeExecInput parses and checks an exec input payload.
func DecodeExecInput(b []byte) (ExecInput, error) {
	var m ExecInput
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateExecInput(e, &m) })
}

func validateExecInput(errs *fieldErrors, m *ExecInput) {
	validateWireHeader(errs, m.SchemaVersion, m.Node)
	validateLogID(errs, m.ID)
	if m.Seq < 0 {
		errs.add("seq", "must be >= 0, not %d", m.Seq)
	}
	ValidateExecInputChunk(errs.add, m.Data, m.EOF, m.Resize)
}

// ValidateExecInputChunk reports the problems of an input chunk's content
// through add (field, format, args): the wire's checks, which the API
// makes too.
func ValidateExecInputChunk(add func(field, format string, args ...any), data []byte, eof bool, resize *TerminalSize) {
	if len(data) > MaxExecInputChunkBytes {
		add("data", "%d bytes, limit %d", len(data), MaxExecInputChunkBytes)
	}
	if len(data) == 0 && !eof && resize == nil {
		add("data", "required unless eof or resize is set")
	}
	if resize != nil {
		for _, f := range []struct {
			name string
			v    int
		}{{"resize.width", resize.Width}, {"resize.height", resize.Height}} {
			if f.v < 1 || f.v > MaxTerminalSize {
				add(f.name, "must be between 1 and %d, not %d", MaxTerminalSize, f.v)
			}
		}
	}
}

// ExecInputCost is what a chunk of n data bytes costs of the session's
// input rate (ExecInputBytesPerSecond).
func ExecInputCost(n int) int { return max(n, ExecInputChunkCost) }
