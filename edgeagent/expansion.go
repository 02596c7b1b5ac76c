package edgeagent

import (
	"fmt"
	"strings"
)

// Kubernetes' $(VAR) expansion, with the semantics of the kubelet's
// third_party/forked/golang/expansion: "$(NAME)" becomes the value of NAME
// when mapping knows it and stays literal otherwise, "$$" is an escaped
// "$", and any other "$" is kept as it is. Expansion is not recursive: a
// value that itself contains "$(X)" is inserted verbatim.

// maxExpansion bounds the bytes of one container's environment (every
// KEY=VALUE, from env and envFrom), command, args and expanded
// subPathExprs together. References may repeat a value, each variable may
// repeat the one before it, and many variables may take the same 1 MiB
// key, so a template of a few hundred bytes could otherwise ask the agent
// for terabytes; the kernel refuses an environment and arguments of more
// than a few MiB (ARG_MAX) at exec anyway.
const maxExpansion = 4 << 20

// errExpansionTooLarge: a container outgrew maxExpansion.
var errExpansionTooLarge = fmt.Errorf("exceeds the limit of %d bytes for a container's environment, command, args and subPathExprs after $(VAR) expansion", maxExpansion)

// expansion expands the strings of one container, and counts what they
// and its environment take, within one budget of maxExpansion bytes.
type expansion struct {
	vars map[string]string
	left int
}

func newExpansion(vars map[string]string) *expansion {
	return &expansion{vars: vars, left: maxExpansion}
}

// expand replaces the $(VAR) references of input using e.vars; references
// to names it lacks stay as written. It fails when the result would not
// fit what is left of the budget, and charges nothing: see charge.
func (e *expansion) expand(input string) (string, error) {
	return e.expandWith(input, func(name string) string {
		if v, ok := e.vars[name]; ok {
			return v
		}
		return "$(" + name + ")"
	})
}

// expandWith is expandWith bounded by what is left of e's budget.
func (e *expansion) expandWith(input string, mapping func(name string) string) (string, error) {
	out, ok := expandWith(input, e.left, mapping)
	if !ok {
		return "", errExpansionTooLarge
	}
	return out, nil
}

// charge takes n bytes from the budget.
func (e *expansion) charge(n int) error {
	if n > e.left {
		e.left = 0
		return errExpansionTooLarge
	}
	e.left -= n
	return nil
}

// expandAll expands and charges every string of in; nil stays nil. An
// error names the index of the string that outgrew the budget under
// field.
func (e *expansion) expandAll(field string, in []string) ([]string, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		v, err := e.expand(s)
		if err == nil {
			err = e.charge(len(v))
		}
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out[i] = v
	}
	return out, nil
}

// expand is expansion.expand without a shared budget, for one string.
func expand(input string, vars map[string]string) string {
	out, _ := newExpansion(vars).expand(input)
	return out
}

// expandWith replaces each $(NAME) reference of input with mapping(NAME).
// It stops, reporting false, as soon as the output would pass limit
// bytes.
func expandWith(input string, limit int, mapping func(name string) string) (string, bool) {
	var buf strings.Builder
	write := func(s string) bool {
		if buf.Len()+len(s) > limit {
			return false
		}
		buf.WriteString(s)
		return true
	}
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		if !write(input[checkpoint:cursor]) {
			return "", false
		}
		read, isVar, advance := readVariableName(input[cursor+1:])
		if isVar {
			read = mapping(read)
		}
		if !write(read) {
			return "", false
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	if !write(input[checkpoint:]) {
		return "", false
	}
	return buf.String(), true
}

// readVariableName reads what follows a '$': an escaped "$", a "(NAME)"
// reference, or anything else, which is returned with its operator. It
// returns the text to emit (or the name), whether it is a name, and how
// many bytes of input it consumed.
func readVariableName(input string) (string, bool, int) {
	switch input[0] {
	case '$':
		return "$", false, 1
	case '(':
		if i := strings.IndexByte(input[1:], ')'); i >= 0 {
			return input[1 : i+1], true, i + 2
		}
		return "$(", false, 1
	default:
		return "$" + input[:1], false, 1
	}
}
