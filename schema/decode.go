package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxManifestSize bounds the size of one manifest file or stream.
const MaxManifestSize = 8 << 20

// Source says where an object was read from.
type Source struct {
	// File is the name passed to Decode (the path for DecodeFile).
	File string
	// Document is the 0-based index of the YAML document in the file.
	Document int
	// Item is the 0-based index in the items of a kind: List, or -1.
	Item int
	// Line is the 1-based line where the object starts.
	Line int
}

// String formats the source as "file:line".
func (s Source) String() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

// Object is one decoded manifest object. Exactly one of the kind fields is
// set.
type Object struct {
	Source    Source
	DaemonSet *DaemonSet
	ConfigMap *ConfigMap
	Secret    *Secret
}

// Kind returns the object's kind.
func (o Object) Kind() string {
	switch {
	case o.DaemonSet != nil:
		return KindDaemonSet
	case o.ConfigMap != nil:
		return KindConfigMap
	case o.Secret != nil:
		return KindSecret
	}
	return ""
}

// Decode reads every object of a manifest stream: YAML (any number of
// documents separated by "---") or JSON, where each document is a DaemonSet
// (apiVersion apps/v1 or edgeset.io/v1), a ConfigMap or Secret (apiVersion
// v1), or a kind: List of them. name is used in error messages and Sources
// only.
//
// Each object is checked field by field against the schema: an unknown
// field is an error naming its full path; a Kubernetes field that has no
// meaning on an edge device (see ignored.go) is dropped and reported as a
// Warning. Decoded daemonsets then get SetDefaults and ValidateDaemonSet;
// ConfigMaps SetConfigMapDefaults and ValidateConfigMap; Secrets
// SetSecretDefaults and ValidateSecret, then MergeStringData, so a returned
// Secret has its stringData merged into data and StringData empty.
//
// The error, when not nil, is a *ValidationError listing every problem of
// every document with its file and line (a YAML syntax error is one such
// problem, and no document of the stream is decoded then). The objects
// returned alongside an error are the ones that had no problem.
func Decode(name string, data []byte) ([]Object, []Warning, error) {
	docs, err := parseYAML(name, data)
	if err != nil {
		return nil, nil, err
	}
	d := &manifestDecoder{file: name}
	for i, doc := range docs {
		d.document(i, doc)
	}
	sortByLine(d.errs, func(e FieldError) int { return e.Line })
	sortByLine(d.warns, func(w Warning) int { return w.Line })
	if len(d.errs) > 0 {
		return d.objects, d.warns, &ValidationError{Errors: d.errs}
	}
	return d.objects, d.warns, nil
}

// DecodeFile decodes the manifest file at path (see Decode).
func DecodeFile(path string) ([]Object, []Warning, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, nil, err
	}
	return Decode(path, data)
}

// DecodePath decodes a manifest file, or every *.yaml, *.yml and *.json file
// under a directory, recursively and in lexical order. Problems of all files
// are merged into one *ValidationError.
func DecodePath(path string) ([]Object, []Warning, error) {
	files, err := ManifestFiles(path)
	if err != nil {
		return nil, nil, err
	}
	var (
		objs  []Object
		warns []Warning
		verr  ValidationError
	)
	for _, f := range files {
		o, w, err := DecodeFile(f)
		objs, warns = append(objs, o...), append(warns, w...)
		var ve *ValidationError
		switch {
		case errors.As(err, &ve):
			verr.Errors = append(verr.Errors, ve.Errors...)
		case err != nil:
			verr.Errors = append(verr.Errors, FieldError{File: f, Message: strings.TrimPrefix(err.Error(), f+": ")})
		}
	}
	if len(verr.Errors) > 0 {
		return objs, warns, &verr
	}
	return objs, warns, nil
}

// ManifestFiles returns path itself when it is a file, or the *.yaml, *.yml
// and *.json files below the directory path in lexical order.
func ManifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != path && strings.HasPrefix(d.Name(), ".") {
			// Hidden entries: editor files, .git, and the ..<timestamp>
			// directories of a Kubernetes ConfigMap mount, whose files the
			// visible symlinks already name.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", path, err)
	}
	return files, nil
}

// readLimited reads a file of at most MaxManifestSize bytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxManifestSize)
	}
	return data, nil
}

// parseYAML splits data into its non-empty YAML documents. JSON is YAML,
// except that JSON allows tabs as indentation; since a JSON string cannot
// hold a raw tab, tabs in a JSON input are turned into spaces, which keeps
// line numbers.
func parseYAML(name string, data []byte) ([]*yaml.Node, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxManifestSize)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		data = bytes.ReplaceAll(data, []byte("\t"), []byte(" "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, syntaxError(name, err)
		}
		if len(doc.Content) == 1 && doc.Content[0].Tag != "!!null" {
			docs = append(docs, doc.Content[0])
		} else {
			docs = append(docs, nil) // keep document numbering
		}
	}
}

// yamlErrorRE matches the YAML parser's "yaml: line N: message" errors.
var yamlErrorRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a YAML parse error into a *ValidationError with the
// line it names, so that it prints as "file:line: invalid YAML: ...".
func syntaxError(name string, err error) error {
	m := yamlErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &ValidationError{Errors: []FieldError{{File: name, Message: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}}
	}
	line, _ := strconv.Atoi(m[1])
	return &ValidationError{Errors: []FieldError{{File: name, Line: line, Message: "invalid YAML: " + m[2]}}}
}

// manifestDecoder accumulates the objects and problems of one stream.
type manifestDecoder struct {
	file    string
	objects []Object
	warns   []Warning
	errs    []FieldError
}

func (d *manifestDecoder) errorAt(line int, field, format string, args ...any) {
	d.errs = append(d.errs, FieldError{File: d.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// document decodes one YAML document: an object or a List.
func (d *manifestDecoder) document(i int, n *yaml.Node) {
	if n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorAt(n.Line, "", "document %d: must be an object, not %s", i, describe(n))
		return
	}
	kind, _ := scalarValue(n, "kind")
	if kind != KindList {
		d.object(Source{File: d.file, Document: i, Item: -1, Line: n.Line}, n)
		return
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		switch key := n.Content[k].Value; key {
		case "apiVersion", "kind", "items", "metadata":
		default:
			d.errorAt(n.Content[k].Line, key, "unknown field")
		}
	}
	items := mappingValue(n, "items")
	if items == nil || items.Kind != yaml.SequenceNode {
		d.errorAt(n.Line, "items", "required: a kind: List must have a list of items")
		return
	}
	for j, item := range items.Content {
		if item.Kind != yaml.MappingNode {
			d.errorAt(item.Line, fmt.Sprintf("items[%d]", j), "must be an object, not %s", describe(item))
			continue
		}
		d.object(Source{File: d.file, Document: i, Item: j, Line: item.Line}, item)
	}
}

// object decodes one object of a known kind.
func (d *manifestDecoder) object(src Source, n *yaml.Node) {
	kind, _ := scalarValue(n, "kind")
	switch kind {
	case KindDaemonSet:
		d.daemonSet(src, n)
	case KindConfigMap:
		d.configMap(src, n)
	case KindSecret:
		d.secret(src, n)
	case "":
		d.errorAt(n.Line, "kind", "required")
	default:
		line := mappingValue(n, "kind").Line
		d.errorAt(line, "kind", "unsupported kind %q: edgeset manifests hold DaemonSets, ConfigMaps and Secrets (or a List of them)", kind)
	}
}

// checkAPIVersion requires one of want as the object's apiVersion.
func (d *manifestDecoder) checkAPIVersion(n *yaml.Node, kind string, want ...string) bool {
	apiVersion, _ := scalarValue(n, "apiVersion")
	if slices.Contains(want, apiVersion) {
		return true
	}
	line := n.Line
	if v := mappingValue(n, "apiVersion"); v != nil {
		line = v.Line
	}
	d.errorAt(line, "apiVersion", "unsupported apiVersion %q for kind %s: want %s", apiVersion, kind, strings.Join(want, " or "))
	return false
}

// walkInto walks n against the type of into, records the walker's warnings
// and errors, and decodes the walked value into into. It returns the
// walker's line index, or nil when there was a problem.
func (d *manifestDecoder) walkInto(n *yaml.Node, table []ignoredField, into any) map[string]position {
	w := newWalker(true, table)
	w.index[""] = position{line: n.Line}
	value, _ := w.walk(n, reflect.TypeOf(into).Elem(), fieldPath{})
	for _, warn := range w.warns {
		warn.File = d.file
		d.warns = append(d.warns, warn)
	}
	nerr := len(d.errs)
	for _, fe := range w.errs {
		d.errorAt(fe.Line, fe.Field, "%s", fe.Message)
	}
	if len(d.errs) > nerr {
		return nil
	}
	if err := decodeJSON(value, into); err != nil {
		d.errorAt(n.Line, "", "%v", err)
		return nil
	}
	return w.index
}

// validated records the problems of a validation error at the lines the
// index gives them, and reports whether there were none.
func (d *manifestDecoder) validated(index map[string]position, err error) bool {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return true
	}
	for _, fe := range ve.Errors {
		field, line := locate(index, fe.Field)
		d.errorAt(line, field, "%s", fe.Message)
	}
	return false
}

// daemonSet walks, decodes, defaults and validates one DaemonSet.
func (d *manifestDecoder) daemonSet(src Source, n *yaml.Node) {
	if !d.checkAPIVersion(n, KindDaemonSet, APIVersionApps, APIVersionEdgeset) {
		return
	}
	ds := new(DaemonSet)
	index := d.walkInto(n, daemonSetIgnored, ds)
	if index == nil {
		return
	}
	SetDefaults(ds)
	if d.validated(index, ValidateDaemonSet(ds)) {
		d.objects = append(d.objects, Object{Source: src, DaemonSet: ds})
	}
}

// configMap walks, decodes, defaults and validates one v1 ConfigMap.
func (d *manifestDecoder) configMap(src Source, n *yaml.Node) {
	if !d.checkAPIVersion(n, KindConfigMap, APIVersionCore) {
		return
	}
	cm := new(ConfigMap)
	index := d.walkInto(n, configIgnored, cm)
	if index == nil {
		return
	}
	SetConfigMapDefaults(cm)
	if d.validated(index, ValidateConfigMap(cm)) {
		d.objects = append(d.objects, Object{Source: src, ConfigMap: cm})
	}
}

// secret walks, decodes, defaults and validates one v1 Secret, then merges
// its stringData into data as the Kubernetes API server does.
func (d *manifestDecoder) secret(src Source, n *yaml.Node) {
	if !d.checkAPIVersion(n, KindSecret, APIVersionCore) {
		return
	}
	if valuesOmitted(n) {
		d.errorAt(n.Line, "data", "this Secret lists keys in status but has no data: it was exported without its values (edgesetctl get secret -o yaml); export it with --show-values to apply it, or it would be emptied")
		return
	}
	s := new(Secret)
	index := d.walkInto(n, configIgnored, s)
	if index == nil {
		return
	}
	SetSecretDefaults(s)
	if !d.validated(index, ValidateSecret(s)) {
		return
	}
	MergeStringData(s)
	if s.Type == SecretTypeServiceAccountToken {
		line := n.Line
		if v := mappingValue(n, "type"); v != nil {
			line = v.Line
		}
		d.warns = append(d.warns, Warning{File: d.file, Line: line, Field: "type", Class: WarningKubernetesOnly,
			Message: prefixPartial + "no token controller fills a service-account-token Secret on edgeset; it holds only the data written here"})
	}
	d.objects = append(d.objects, Object{Source: src, Secret: s})
}

// valuesOmitted reports whether a Secret document is an export without
// values: status.keys lists keys, and neither data nor stringData is set.
func valuesOmitted(n *yaml.Node) bool {
	status := mappingValue(n, "status")
	if status == nil || status.Kind != yaml.MappingNode {
		return false
	}
	keys := mappingValue(status, "keys")
	return keys != nil && keys.Kind == yaml.SequenceNode && len(keys.Content) > 0 &&
		mappingValue(n, "data") == nil && mappingValue(n, "stringData") == nil
}

// sortByLine orders problems of one file by line, keeping the order of
// problems on the same line.
func sortByLine[T any](s []T, line func(T) int) {
	slices.SortStableFunc(s, func(a, b T) int { return line(a) - line(b) })
}

// decodeJSON moves a walked value into its Go type through encoding/json,
// rejecting unknown fields as a second line of defence.
func decodeJSON(value any, into any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: %w", te.Field, err)
		}
		return err
	}
	return nil
}
