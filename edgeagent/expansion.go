package edgeagent

import "strings"

// Kubernetes' $(VAR) expansion, with the semantics of the kubelet's
// third_party/forked/golang/expansion: "$(NAME)" becomes the value of NAME
// when mapping knows it and stays literal otherwise, "$$" is an escaped
// "$", and any other "$" is kept as it is. Expansion is not recursive: a
// value that itself contains "$(X)" is inserted verbatim.

// expand replaces the $(VAR) references of input using vars; references
// to names vars lacks stay as written.
func expand(input string, vars map[string]string) string {
	return expandWith(input, func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return "$(" + name + ")"
	})
}

// expandWith replaces each $(NAME) reference of input with mapping(NAME).
func expandWith(input string, mapping func(name string) string) string {
	var buf strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		buf.WriteString(input[checkpoint:cursor])
		read, isVar, advance := readVariableName(input[cursor+1:])
		if isVar {
			buf.WriteString(mapping(read))
		} else {
			buf.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return buf.String() + input[checkpoint:]
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

// expandAll expands every string of in; nil stays nil.
func expandAll(in []string, vars map[string]string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vars)
	}
	return out
}
