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

	// Interactive sessions (edgesetctl exec -i / -t) take ExecInput
	// chunks on the session's own input topic (ExecInputTopic), which the
	// agent subscribes to before it answers with a Ready chunk.
	//
	// StdinStream attaches the command's standard input, fed by the
	// input chunks' data until one says eof (Stdin must then be empty).
	StdinStream bool `json:"stdinStream,omitempty"`
	// TTY runs the command on a terminal: its output comes as one stdout
	// stream (stderr merged, as kubectl exec -t does), and the input
	// chunks may resize the terminal. Width and Height are its initial
	// size in characters (0: the engine's default).
	TTY    bool `json:"tty,omitempty"`
	Width  int  `json:"width,omitempty"`
	Height int  `json:"height,omitempty"`
	// IdleTimeoutSeconds ends an interactive session after this long
	// without input or output; 0 means DefaultExecIdleTimeoutSeconds.
	IdleTimeoutSeconds int `json:"idleTimeoutSeconds,omitempty"`
}

// Interactive reports whether the session takes input chunks (stdin,
// terminal resizes) on its input topic.
func (r ExecRequest) Interactive() bool { return r.StdinStream || r.TTY }

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
	// Ready, on the first chunk (Seq 0) of an interactive session, says
	// the agent found the container and reads the session's input topic:
	// input may be sent from now on.
	Ready bool `json:"ready,omitempty"`
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
	ValidateExecInteractive(errs.add, m.StdinStream, m.TTY, m.Width, m.Height, m.IdleTimeoutSeconds)
	if m.StdinStream && m.Stdin != "" {
		errs.add("stdin", "must be empty with stdinStream: the input comes in chunks")
	}
}

// ValidateExecInteractive reports the problems of an exec's interactive
// fields through add (field, format, args): the wire's checks, which the
// API makes too.
func ValidateExecInteractive(add func(field, format string, args ...any), stdinStream, tty bool, width, height, idle int) {
	for _, f := range []struct {
		name string
		v    int
	}{{"width", width}, {"height", height}} {
		switch {
		case f.v < 0 || f.v > MaxTerminalSize:
			add(f.name, "must be between 0 and %d, not %d", MaxTerminalSize, f.v)
		case f.v != 0 && !tty:
			add(f.name, "set without tty: only a terminal has a size")
		}
	}
	switch {
	case idle < 0 || idle > MaxExecTimeoutSeconds:
		add("idleTimeoutSeconds", "must be between 0 and %d, not %d", MaxExecTimeoutSeconds, idle)
	case idle != 0 && !stdinStream && !tty:
		add("idleTimeoutSeconds", "set without stdinStream or tty: only an interactive session idles")
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
	if m.Ready && (m.Seq != 0 || m.Data != "" || m.EOF) {
		errs.add("ready", "only on the first chunk (seq 0), without data or eof")
	}
}
