package schema

// Bounds of a remote exec (edgesetctl exec).
const (
	// MaxExecArgs and MaxExecArgBytes bound an ExecRequest's command.
	MaxExecArgs     = 64
	MaxExecArgBytes = 16 << 10
	// MaxExecStdinBytes bounds the standard input an ExecRequest carries.
	MaxExecStdinBytes = 64 << 10
	// DefaultExecTimeoutSeconds and MaxExecTimeoutSeconds bound how long
	// the command may run before the agent ends the session.
	DefaultExecTimeoutSeconds = 60
	MaxExecTimeoutSeconds     = 3600
	// MaxExecOutputBytes bounds the output the agent sends back, both
	// streams together; the rest is dropped and the last chunk says so.
	MaxExecOutputBytes = 4 << 20
	// MaxExecChunkBytes bounds one ExecChunk's Data.
	MaxExecChunkBytes = 16 << 10
)

// Streams of an ExecChunk.
const (
	ExecStdout = "stdout"
	ExecStderr = "stderr"
)

// ExecRequest asks a node to run a command in a container of one of its
// instances (kubectl exec without a terminal), published by the
// controller on the node's exec/request topic without retain. Cancel ends
// session ID; its other fields are then ignored.
type ExecRequest struct {
	SchemaVersion int    `json:"schemaVersion"`
	Node          string `json:"node"`
	// ID identifies the session; every ExecChunk of the answer carries it.
	ID string `json:"id"`
	// DaemonSet is "namespace/name"; required unless Cancel is set.
	DaemonSet string `json:"daemonSet,omitempty"`
	// Container names a container of the template; empty is the first.
	Container string `json:"container,omitempty"`
	// Command is the argv to run, not through a shell.
	Command []string `json:"command,omitempty"`
	// Stdin is the command's whole standard input (closed after it).
	Stdin string `json:"stdin,omitempty"`
	// TimeoutSeconds ends the session after this long; 0 means
	// DefaultExecTimeoutSeconds.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Requester names who asked (the API user), for the node's log.
	Requester string `json:"requester,omitempty"`
	Cancel    bool   `json:"cancel,omitempty"`
}

// ExecChunk is one piece of an exec session's output, published by the
// agent on its exec/response topic without retain. Seq counts from 0. The
// last chunk has EOF set and either ExitCode or Error.
type ExecChunk struct {
	SchemaVersion int    `json:"schemaVersion"`
	Node          string `json:"node"`
	ID            string `json:"id"`
	Seq           int    `json:"seq"`
	// Stream is ExecStdout or ExecStderr when Data is set.
	Stream string `json:"stream,omitempty"`
	// Data is output text, valid UTF-8 (invalid bytes replaced with
	// U+FFFD), at most MaxExecChunkBytes.
	Data     string `json:"data,omitempty"`
	EOF      bool   `json:"eof,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Error    string `json:"error,omitempty"`
	// Truncated, on the last chunk, says output past MaxExecOutputBytes
	// was dropped.
	Truncated bool `json:"truncated,omitempty"`
}

// DecodeExecRequest parses and checks an exec/request payload.
func DecodeExecRequest(b []byte) (ExecRequest, error) {
	var m ExecRequest
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateExecRequest(e, &m) })
}

// DecodeExecChunk parses and checks an exec/response payload.
func DecodeExecChunk(b []byte) (ExecChunk, error) {
	var m ExecChunk
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateExecChunk(e, &m) })
}

func validateExecRequest(errs *fieldErrors, m *ExecRequest) {
	if !validateRequest(errs, m.SchemaVersion, m.Node, m.ID, m.DaemonSet, m.Container, m.Cancel) {
		return
	}
	ValidateExecCommand(errs.add, m.Command)
	if len(m.Stdin) > MaxExecStdinBytes {
		errs.add("stdin", "%d bytes, limit %d", len(m.Stdin), MaxExecStdinBytes)
	}
	if m.TimeoutSeconds < 0 || m.TimeoutSeconds > MaxExecTimeoutSeconds {
		errs.add("timeoutSeconds", "must be between 0 and %d, not %d", MaxExecTimeoutSeconds, m.TimeoutSeconds)
	}
	if len(m.Requester) > 256 {
		errs.add("requester", "%d bytes, limit 256", len(m.Requester))
	}
}

// ValidateExecCommand reports the problems of an exec command through add
// (field, format, args).
func ValidateExecCommand(add func(field, format string, args ...any), cmd []string) {
	total := 0
	for _, a := range cmd {
		total += len(a)
	}
	switch {
	case len(cmd) == 0 || cmd[0] == "":
		add("command", "required: the program to run and its arguments")
	case len(cmd) > MaxExecArgs:
		add("command", "%d arguments, limit %d", len(cmd), MaxExecArgs)
	case total > MaxExecArgBytes:
		add("command", "%d bytes, limit %d", total, MaxExecArgBytes)
	}
}

func validateExecChunk(errs *fieldErrors, m *ExecChunk) {
	validateChunk(errs, m.SchemaVersion, m.Node, m.ID, m.Seq, m.Data, MaxExecChunkBytes)
	if m.Data != "" && m.Stream != ExecStdout && m.Stream != ExecStderr {
		errs.add("stream", "must be %q or %q with data, not %q", ExecStdout, ExecStderr, m.Stream)
	}
	if (m.Error != "" || m.ExitCode != nil) && !m.EOF {
		errs.add("eof", "must be true in a chunk carrying an exit code or an error")
	}
}
