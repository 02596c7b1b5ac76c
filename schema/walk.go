package schema

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxWalkNodes bounds the YAML nodes visited per document, counting every
// expansion of an alias, so a small input cannot expand without limit.
const maxWalkNodes = 200_000

// action tells a parent what to do with a walked value.
type action int

const (
	keep     action = iota // use the value
	omit                   // leave the field out (null, error or dropped field)
	dropItem               // drop the enclosing list item (see ignoredField.dropItem)
)

// position is where an output path came from: its line and its path as
// written in the input (list indices differ once items are dropped).
type position struct {
	line int
	src  string
}

// fieldPath is a path in the decoded value (out) and in the input (src).
type fieldPath struct{ out, src string }

func (p fieldPath) child(name string) fieldPath {
	if p.out == "" {
		return fieldPath{name, name}
	}
	return fieldPath{p.out + "." + name, p.src + "." + name}
}

func (p fieldPath) item(out, src int) fieldPath {
	return fieldPath{fmt.Sprintf("%s[%d]", p.out, out), fmt.Sprintf("%s[%d]", p.src, src)}
}

func (p fieldPath) key(k string) fieldPath {
	return fieldPath{p.out + "[" + k + "]", p.src + "[" + k + "]"}
}

// walker turns a YAML node tree into JSON-ready values (map[string]any,
// []any, string, int64, uint64, bool), checking it against a Go type as it
// goes: every field must be one of the type's JSON fields (or, in strict
// mode, is an error naming its path; otherwise it is skipped), every scalar
// must have the kind the field needs, and fields in the ignored table are
// dropped with a warning. It records the line of every path it visits.
type walker struct {
	strict  bool
	ignored []ignoredField
	kept    map[string]bool // keptNames(ignored)
	errs    []FieldError
	warns   []Warning
	index   map[string]position
	budget  int

	// droppedVolumes maps the names of the current pod spec's volumes that
	// edgeset does not provide to their source kind.
	droppedVolumes map[string]string
}

func newWalker(strict bool, ignored []ignoredField) *walker {
	return &walker{strict: strict, ignored: ignored, kept: keptNames(ignored), index: map[string]position{}, budget: maxWalkNodes}
}

func (w *walker) errorAt(p fieldPath, line int, format string, args ...any) {
	w.errs = append(w.errs, FieldError{Field: p.src, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (w *walker) warnAt(p fieldPath, line int, class WarningClass, format string, args ...any) {
	w.warns = append(w.warns, Warning{Field: p.src, Line: line, Class: class, Message: fmt.Sprintf(format, args...)})
}

var (
	intOrStringType  = reflect.TypeOf(IntOrString{})
	quantityType     = reflect.TypeOf(Quantity(""))
	timeType         = reflect.TypeOf(time.Time{})
	podSpecType      = reflect.TypeOf(PodSpec{})
	volumeType       = reflect.TypeOf(Volume{})
	volumeMountType  = reflect.TypeOf(VolumeMount{})
	bytesType        = reflect.TypeOf([]byte(nil))
	prefetchType     = reflect.TypeOf(PrefetchPolicy{})
	errBudgetMessage = fmt.Sprintf("document too large: more than %d YAML nodes (counting alias expansions)", maxWalkNodes)
)

// walk converts n, which must suit type t, and reports what the parent
// should do with the result.
func (w *walker) walk(n *yaml.Node, t reflect.Type, p fieldPath) (any, action) {
	if w.budget--; w.budget < 0 {
		if w.budget == -1 {
			w.errorAt(p, n.Line, "%s", errBudgetMessage)
		}
		return nil, omit
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, omit
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case intOrStringType:
		return w.intOrString(n, p)
	case quantityType:
		return w.scalar(n, p, "a quantity such as 100m or 1Gi", "!!str", "!!int", "!!float")
	case timeType:
		return w.timestamp(n, p)
	case bytesType:
		return w.base64(n, p)
	case prefetchType:
		return w.prefetch(n, p)
	}
	switch t.Kind() {
	case reflect.Struct:
		return w.walkStruct(n, t, p)
	case reflect.Map:
		return w.walkMap(n, t, p)
	case reflect.Slice:
		return w.walkSlice(n, t, p)
	case reflect.String:
		return w.scalar(n, p, "a string", "!!str", "!!timestamp")
	case reflect.Bool:
		return w.boolean(n, p)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return w.integer(n, t, p)
	}
	panic("schema: walker has no rule for " + t.String())
}

// describe names the kind of a YAML node for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!str":
		return "a string"
	case "!!timestamp":
		return "a timestamp"
	}
	return "a " + strings.TrimPrefix(n.Tag, "!!") + " value"
}

func (w *walker) mismatch(n *yaml.Node, p fieldPath, want string) (any, action) {
	w.errorAt(p, n.Line, "must be %s, not %s", want, describe(n))
	return nil, omit
}

// scalar accepts a scalar with one of tags and returns its text.
func (w *walker) scalar(n *yaml.Node, p fieldPath, want string, tags ...string) (any, action) {
	if n.Kind == yaml.ScalarNode {
		for _, tag := range tags {
			if n.Tag == tag {
				return n.Value, keep
			}
		}
	}
	return w.mismatch(n, p, want)
}

// timestamp accepts an RFC 3339 time such as 2025-06-01T08:00:00Z.
func (w *walker) timestamp(n *yaml.Node, p fieldPath) (any, action) {
	v, act := w.scalar(n, p, "an RFC 3339 time", "!!str", "!!timestamp")
	if act != keep {
		return v, act
	}
	if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
		w.errorAt(p, n.Line, "must be an RFC 3339 time such as 2025-06-01T08:00:00Z, not %q", n.Value)
		return nil, omit
	}
	return v, keep
}

// base64 accepts bytes written as a standard base64 string (line breaks
// allowed, as encoding/json and so the Kubernetes API server accept them)
// or a YAML !!binary scalar (any white space allowed, as YAML says), and
// returns their canonical base64 text.
func (w *walker) base64(n *yaml.Node, p fieldPath) (any, action) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!binary") {
		return w.mismatch(n, p, "a base64 string")
	}
	text := n.Value
	if n.Tag == "!!binary" {
		text = strings.Join(strings.Fields(text), "")
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		w.errorAt(p, n.Line, "invalid base64 (standard encoding, as in Kubernetes): %v", err)
		return nil, omit
	}
	return base64.StdEncoding.EncodeToString(b), keep
}

func (w *walker) boolean(n *yaml.Node, p fieldPath) (any, action) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		return w.mismatch(n, p, "a boolean (true or false)")
	}
	return b, keep
}

// integerLiteral matches what YAML writes as an integer. YAML resolves
// one too large for 64 bits to a float, which is then out of range, not
// "not an integer".
var integerLiteral = regexp.MustCompile(`^[-+]?([0-9_]+|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+)$`)

// integer accepts an integer that fits t.
func (w *walker) integer(n *yaml.Node, t reflect.Type, p fieldPath) (any, action) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" && integerLiteral.MatchString(n.Value) {
		w.errorAt(p, n.Line, "must be an integer between %s, not %s", integerRange(t), n.Value)
		return nil, omit
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return w.mismatch(n, p, "an integer")
	}
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		var u uint64
		maxU := uint64(math.MaxUint64) >> (64 - bits)
		if err := n.Decode(&u); err != nil || u > maxU {
			w.errorAt(p, n.Line, "must be an integer between 0 and %d, not %s", maxU, n.Value)
			return nil, omit
		}
		return u, keep
	}
	var i int64
	maxI := int64(math.MaxInt64) >> (64 - bits)
	if err := n.Decode(&i); err != nil || i > maxI || i < -maxI-1 {
		w.errorAt(p, n.Line, "must be an integer between %d and %d, not %s", -maxI-1, maxI, n.Value)
		return nil, omit
	}
	return i, keep
}

// integerRange describes the values of integer type t.
func integerRange(t reflect.Type) string {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return fmt.Sprintf("0 and %d", uint64(math.MaxUint64)>>(64-bits))
	}
	maxI := int64(math.MaxInt64) >> (64 - bits)
	return fmt.Sprintf("%d and %d", -maxI-1, maxI)
}

// intOrString accepts a 32-bit integer or a string.
func (w *walker) intOrString(n *yaml.Node, p fieldPath) (any, action) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		return n.Value, keep
	}
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float" && integerLiteral.MatchString(n.Value)) {
		return w.integer(n, reflect.TypeOf(int32(0)), p)
	}
	return w.mismatch(n, p, "an integer or a string")
}

// prefetch accepts spec.rollout.prefetch: a boolean, or the object form
// with its fields checked as a struct's.
func (w *walker) prefetch(n *yaml.Node, p fieldPath) (any, action) {
	if n.Kind == yaml.ScalarNode {
		return w.boolean(n, p)
	}
	if n.Kind != yaml.MappingNode {
		return w.mismatch(n, p, "true, false or an object with maxConcurrentPerSite and topologyKey")
	}
	return w.walkStruct(n, reflect.TypeOf(prefetchObject{}), p)
}

func (w *walker) walkSlice(n *yaml.Node, t reflect.Type, p fieldPath) (any, action) {
	if n.Kind != yaml.SequenceNode {
		return w.mismatch(n, p, "a list")
	}
	out := make([]any, 0, len(n.Content))
	for i, item := range n.Content {
		ip := p.item(len(out), i)
		w.index[ip.out] = position{item.Line, ip.src}
		v, act := w.walk(item, t.Elem(), ip)
		switch {
		case act == keep:
			out = append(out, v)
		case act == omit && item.Tag == "!!null":
			w.errorAt(ip, item.Line, "must not be null")
		}
	}
	return out, keep
}

func (w *walker) walkMap(n *yaml.Node, t reflect.Type, p fieldPath) (any, action) {
	if n.Kind != yaml.MappingNode {
		return w.mismatch(n, p, "an object")
	}
	out := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.errorAt(p, k.Line, "keys must be strings, not %s", describe(k))
			continue
		}
		kp := p.key(k.Value)
		if _, dup := out[k.Value]; dup {
			w.errorAt(kp, k.Line, "duplicate key")
			continue
		}
		w.index[kp.out] = position{k.Line, kp.src}
		if val, act := w.walk(v, t.Elem(), kp); act == keep {
			out[k.Value] = val
		} else if v.Tag == "!!null" && t.Elem().Kind() != reflect.Pointer {
			w.errorAt(kp, v.Line, "must not be null")
		}
	}
	return out, keep
}

func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, p fieldPath) (any, action) {
	if n.Kind != yaml.MappingNode {
		return w.mismatch(n, p, "an object")
	}
	switch t {
	case podSpecType:
		w.droppedVolumes = unprovidedVolumes(n)
	case volumeType, volumeMountType:
		if w.dropsVolume(n, t, p) {
			return nil, dropItem
		}
		if t == volumeType && !w.checkVolumeSources(n, p) {
			return nil, omit
		}
	}
	fields := jsonFields(t)
	out := make(map[string]any, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	result := keep
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.errorAt(p, k.Line, "keys must be strings, not %s", describe(k))
			continue
		}
		fp := p.child(k.Value)
		if seen[k.Value] {
			w.errorAt(fp, k.Line, "duplicate field")
			continue
		}
		seen[k.Value] = true
		w.index[fp.out] = position{k.Line, fp.src}
		ft, known := fields[k.Value]
		if !known {
			if w.unknownField(fp, k, v) {
				result = dropItem
			}
			continue
		}
		switch val, act := w.walk(v, ft, fp); act {
		case keep:
			out[k.Value] = val
			w.keptField(fp, k)
		case dropItem:
			result = dropItem // up to the nearest list item
		}
	}
	return out, result
}

// unknownField handles a field that t does not have: a field in the ignored
// table is dropped with a warning (none when its value v is the table's
// noop value), anything else is an error in strict mode.
// It reports whether the enclosing list item must be dropped.
func (w *walker) unknownField(p fieldPath, k, v *yaml.Node) bool {
	if f, ok := matchIgnored(w.ignored, p.src); ok && f.forbidden {
		w.errorAt(p, k.Line, "%s", f.reason)
		return false
	}
	if f, ok := matchIgnored(w.ignored, p.src); ok && !f.keep {
		if f.noop == "" || v.Kind != yaml.ScalarNode || v.Value != f.noop {
			w.warnAt(p, k.Line, f.class, "%s", ignoredMessage(f))
		}
		return f.dropItem
	}
	if w.strict {
		w.errorAt(p, k.Line, "unknown field")
	}
	return false
}

// keptField warns about a decoded field that the table marks as only
// partly honoured.
func (w *walker) keptField(p fieldPath, k *yaml.Node) {
	if !w.kept[k.Value] {
		return
	}
	if f, ok := keptWarning(w.ignored, p.src); ok {
		w.warnAt(p, k.Line, f.class, "%s", ignoredMessage(f))
	}
}

// jsonFieldCache maps a struct type to its JSON field names and types.
var jsonFieldCache sync.Map

// jsonFields returns the fields encoding/json decodes for t, keyed by JSON
// name; fields of embedded structs without a JSON name are promoted. Reading
// the tags keeps the accepted field set from drifting from the types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := jsonFieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" || (!sf.IsExported() && !sf.Anonymous) {
			continue
		}
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(sf.Type) {
				fields[k] = v
			}
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fields[name] = sf.Type
	}
	jsonFieldCache.Store(t, fields)
	return fields
}

// mappingValue returns the value of key in mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			v := n.Content[i+1]
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

// scalarValue returns the text of key in mapping n when it is a scalar.
func scalarValue(n *yaml.Node, key string) (string, bool) {
	v := mappingValue(n, key)
	if v == nil || v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", false
	}
	return v.Value, true
}

var indexPattern = regexp.MustCompile(`\[\d+\]`)

// parentPath strips the last segment of a field path: "a.b[2]" becomes
// "a.b", "a.b" becomes "a", "a" becomes "".
func parentPath(field string) string {
	if strings.HasSuffix(field, "]") {
		if i := strings.LastIndex(field, "["); i >= 0 {
			return field[:i]
		}
	}
	if i := strings.LastIndex(field, "."); i >= 0 {
		return field[:i]
	}
	return ""
}

// locate maps a path of the decoded value to its path as written and its
// line, using the nearest recorded ancestor when the path itself was not
// written (a missing required field points at its parent).
func locate(index map[string]position, field string) (src string, line int) {
	for anc := field; ; anc = parentPath(anc) {
		if pos, ok := index[anc]; ok {
			return strings.TrimPrefix(pos.src+field[len(anc):], "."), pos.line
		}
		if anc == "" {
			return field, 0
		}
	}
}
