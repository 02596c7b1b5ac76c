package schema

import (
	"regexp"
	"unicode/utf8"
)

// Bounds of an on-demand log stream.
const (
	// DefaultLogBytes is the log volume a LogRequest with MaxBytes 0 asks for.
	DefaultLogBytes = 1 << 20
	// MaxLogBytes is the largest MaxBytes a LogRequest may ask for.
	MaxLogBytes = 8 << 20
	// MaxLogChunkBytes bounds a LogChunk's Data; escaped as JSON it stays
	// well under MaxMessageSize.
	MaxLogChunkBytes = 16 << 10
)

// LogRequest asks a node for one container's log, published by the
// controller on the node's logs/request topic without retain. A request
// with Cancel set (or a second request with the same ID and Follow unset)
// ends the stream ID; its other fields are then ignored.
type LogRequest struct {
	SchemaVersion int    `json:"schemaVersion"`
	Node          string `json:"node"`
	// ID identifies the stream; every LogChunk of the answer carries it.
	ID string `json:"id"`
	// DaemonSet is "namespace/name"; required unless Cancel is set.
	DaemonSet string `json:"daemonSet,omitempty"`
	// Container names a container of the template; empty is the first.
	Container string `json:"container,omitempty"`
	// Tail is how many of the last lines to send; 0 sends the whole log.
	Tail int `json:"tail,omitempty"`
	// Follow keeps streaming new lines until cancelled or the agent's
	// limit on a follow session passes.
	Follow bool `json:"follow,omitempty"`
	// MaxBytes bounds the log bytes sent; 0 means DefaultLogBytes.
	MaxBytes int  `json:"maxBytes,omitempty"`
	Cancel   bool `json:"cancel,omitempty"`
	// Previous asks for the log of the container's last terminated run
	// (kubectl logs --previous); Follow is then ignored. The node answers
	// with an error when the container has no terminated run.
	Previous bool `json:"previous,omitempty"`
}

// LogChunk is one piece of a log stream, published by the agent on its
// logs/response topic without retain. Seq counts from 0 within a stream.
// The last chunk has EOF set; Error, when set, says why the stream failed
// and is only carried by the last chunk.
type LogChunk struct {
	SchemaVersion int    `json:"schemaVersion"`
	Node          string `json:"node"`
	ID            string `json:"id"`
	Seq           int    `json:"seq"`
	// Data is log text, valid UTF-8 (invalid bytes are replaced with
	// U+FFFD), at most MaxLogChunkBytes.
	Data  string `json:"data,omitempty"`
	EOF   bool   `json:"eof,omitempty"`
	Error string `json:"error,omitempty"`
}

var logIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// DecodeLogRequest parses and checks a logs/request payload.
func DecodeLogRequest(b []byte) (LogRequest, error) {
	var m LogRequest
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateLogRequest(e, &m) })
}

// DecodeLogChunk parses and checks a logs/response payload.
func DecodeLogChunk(b []byte) (LogChunk, error) {
	var m LogChunk
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateLogChunk(e, &m) })
}

func validateLogID(errs *fieldErrors, id string) {
	if !logIDRE.MatchString(id) {
		errs.add("id", "invalid stream id %q: want 1 to 64 letters, digits, '-' or '_'", id)
	}
}

func validateLogRequest(errs *fieldErrors, m *LogRequest) {
	if !validateRequest(errs, m.SchemaVersion, m.Node, m.ID, m.DaemonSet, m.Container, m.Cancel) {
		return
	}
	if m.Tail < 0 {
		errs.add("tail", "must be >= 0, not %d", m.Tail)
	}
	if m.MaxBytes < 0 || m.MaxBytes > MaxLogBytes {
		errs.add("maxBytes", "must be between 0 and %d, not %d", MaxLogBytes, m.MaxBytes)
	}
}

func validateLogChunk(errs *fieldErrors, m *LogChunk) {
	validateChunk(errs, m.SchemaVersion, m.Node, m.ID, m.Seq, m.Data, MaxLogChunkBytes)
	if m.Error != "" && !m.EOF {
		errs.add("eof", "must be true in a chunk carrying an error")
	}
}

// validateChunk checks what every chunk of an on-demand answer (LogChunk,
// ExecChunk) carries: the wire header, the stream's id, its sequence
// number, and data of valid UTF-8 within max bytes.
func validateChunk(errs *fieldErrors, version int, node, id string, seq int, data string, max int) {
	validateWireHeader(errs, version, node)
	validateLogID(errs, id)
	if seq < 0 {
		errs.add("seq", "must be >= 0, not %d", seq)
	}
	if len(data) > max {
		errs.add("data", "%d bytes, limit %d", len(data), max)
	}
	if !utf8.ValidString(data) {
		errs.add("data", "not valid UTF-8")
	}
}

// validateRequest checks what every on-demand request (LogRequest,
// ExecRequest) carries: the wire header and stream id, and, unless it is a
// cancel, the daemonset and container it is for. It reports whether the
// request's own fields are to be checked (false for a cancel).
func validateRequest(errs *fieldErrors, version int, node, id, ds, container string, cancel bool) bool {
	validateWireHeader(errs, version, node)
	validateLogID(errs, id)
	if cancel {
		return false
	}
	validateDaemonSetKey(errs, "daemonSet", ds)
	if container != "" && !IsDNS1123Label(container) {
		errs.add("container", "invalid container name %q: must be a DNS-1123 label", container)
	}
	return true
}
