package schema

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of an input. Field is the path
// of the field as written in the manifest or message, such as
// "spec.template.spec.containers[0].image"; it is empty for a problem with
// the whole input. File and Line say where the field was read from when the
// value came from a file (zero when unknown).
type FieldError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
}

// Error formats the problem as "file:line: field: message", leaving out the
// parts that are unknown.
func (e FieldError) Error() string {
	return formatProblem(e.File, e.Line, e.Field, e.Message)
}

// formatProblem renders "file:line: field: message" without empty parts.
func formatProblem(file string, line int, field, msg string) string {
	var b strings.Builder
	if file != "" {
		b.WriteString(file)
		if line > 0 {
			fmt.Fprintf(&b, ":%d", line)
		}
		b.WriteString(": ")
	}
	if field != "" {
		b.WriteString(field)
		b.WriteString(": ")
	}
	b.WriteString(msg)
	return b.String()
}

// ValidationError lists every problem found in an input, not just the
// first. Decode, DecodeNodes, the wire decoders and ValidateDaemonSet return
// it (as *ValidationError) for invalid input.
type ValidationError struct {
	Errors []FieldError
}

// Error returns one problem per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// WarningClass says what accepting a manifest despite a Warning costs.
type WarningClass int

const (
	// WarningChangesDaemon: the field is dropped (or not honoured) and the
	// daemon gets something else than its authors wrote: a volume or mount
	// is missing, a security setting is not applied, a resolver option is
	// lost. `edgesetctl validate --strict` makes these errors. It is the
	// zero value, so a Warning nobody classified is treated as serious.
	WarningChangesDaemon WarningClass = iota
	// WarningKubernetesOnly: the field needs the Kubernetes API, its server
	// or its scheduler by nature (service accounts, priority classes,
	// scheduling, cluster DNS, server-set metadata, status); nothing a
	// device could do would honour it, and dropping it changes nothing the
	// daemon can observe besides that missing API.
	WarningKubernetesOnly
)

// String names the class: "changes-daemon" or "kubernetes-only".
func (c WarningClass) String() string {
	if c == WarningKubernetesOnly {
		return "kubernetes-only"
	}
	return "changes-daemon"
}

// Warning is a field that was accepted but is not (or only partly)
// honoured by edgeset, such as a Kubernetes field with no meaning on an edge
// device. A dropped field is removed before decoding; it is never
// reinterpreted. Message says exactly what the daemon loses.
type Warning struct {
	Field   string
	Message string
	File    string
	Line    int
	Class   WarningClass
}

// ChangesDaemon reports whether the warning is of class
// WarningChangesDaemon.
func (w Warning) ChangesDaemon() bool { return w.Class == WarningChangesDaemon }

// String formats the warning as "file:line: field: message".
func (w Warning) String() string {
	return formatProblem(w.File, w.Line, w.Field, w.Message)
}

// fieldErrors collects problems during validation.
type fieldErrors []FieldError

// add records a problem with field.
func (e *fieldErrors) add(field, format string, args ...any) {
	*e = append(*e, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// err returns the collected problems as a *ValidationError, or nil.
func (e fieldErrors) err() error {
	if len(e) == 0 {
		return nil
	}
	return &ValidationError{Errors: e}
}
