package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// Template output formats of get, with their argument after "=".
const (
	outputJSONPath      = "jsonpath"
	outputCustomColumns = "custom-columns"
)

// printer is a parsed -o: a format name, and for jsonpath and
// custom-columns the parsed templates.
type printer struct {
	format   string
	template *jsonpath.JSONPath
	columns  []column
}

// column is one column of -o custom-columns.
type column struct {
	header string
	path   *jsonpath.JSONPath
}

// parsePrinter parses -o: table (empty), wide, json, yaml, name,
// jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...
func parsePrinter(o string) (printer, error) {
	name, arg, hasArg := strings.Cut(o, "=")
	switch {
	case name == outputJSONPath && hasArg:
		j, err := parseJSONPath("jsonpath", arg)
		if err != nil {
			return printer{}, usageError{fmt.Errorf("-o jsonpath: error parsing jsonpath %s: %w", arg, err)}
		}
		return printer{format: outputJSONPath, template: j}, nil
	case name == outputCustomColumns && hasArg:
		cols, err := parseColumns(arg)
		if err != nil {
			return printer{}, usageError{fmt.Errorf("-o custom-columns: %w", err)}
		}
		return printer{format: outputCustomColumns, columns: cols}, nil
	case name == outputJSONPath || name == outputCustomColumns:
		return printer{}, usageError{fmt.Errorf("-o %s: want %s=TEMPLATE", name, name)}
	}
	if err := checkOutput(o); err != nil {
		return printer{}, err
	}
	return printer{format: o}, nil
}

// humanReadable reports whether the format prints for people (and so says
// "No resources found" on an empty list) rather than data.
func (p printer) humanReadable() bool {
	switch p.format {
	case outputJSON, outputYAML, outputJSONPath:
		return false
	}
	return true
}

// manifests reports whether the format prints manifest shapes (see
// objects.go) rather than edgeset's tables.
func (p printer) manifests() bool {
	switch p.format {
	case outputJSON, outputYAML, outputJSONPath, outputCustomColumns:
		return true
	}
	return false
}

// parseJSONPath parses a kubectl JSONPath template. Missing keys print
// nothing, as kubectl's --allow-missing-template-keys (default true).
func parseJSONPath(name, tmpl string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New(name).AllowMissingKeys(true)
	if err := j.Parse(tmpl); err != nil {
		return nil, err
	}
	return j, nil
}

// parseColumns parses kubectl's custom-columns spec:
// HEADER:PATH[,HEADER:PATH...], each PATH a relaxed JSONPath.
func parseColumns(spec string) ([]column, error) {
	if spec == "" {
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
	}
	var cols []column
	for i, part := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		expr, err := relaxedJSONPath(path)
		if err != nil {
			return nil, err
		}
		j, err := parseJSONPath(fmt.Sprintf("column%d", i), expr)
		if err != nil {
			return nil, fmt.Errorf("column %s: error parsing jsonpath %s: %w", header, path, err)
		}
		cols = append(cols, column{header: header, path: j})
	}
	return cols, nil
}

// relaxedJSONPathRE matches what kubectl's RelaxedJSONPathExpression
// accepts: name1.name2, .name1.name2, {name1.name2} or {.name1.name2}.
var relaxedJSONPathRE = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// relaxedJSONPath turns a column or --sort-by path into a template
// "{.name1.name2}", as kubectl does.
func relaxedJSONPath(path string) (string, error) {
	m := relaxedJSONPathRE.FindStringSubmatch(path)
	if m == nil {
		return "", fmt.Errorf("unexpected path string %q, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'", path)
	}
	field := m[1]
	if field == "" {
		field = m[2]
	}
	return "{." + field + "}", nil
}

// genericObject converts a manifest shape into the maps, slices and
// scalars (int64 or float64 numbers) that JSONPath walks, as kubectl's
// unstructured objects.
func genericObject(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return numbers(out), nil
}

// numbers replaces json.Numbers by int64 or float64 in v.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// printManifests prints objects in a manifest format: the one object
// alone when single, else a v1 List of them.
func printManifests(w io.Writer, p printer, objects []any, single bool) error {
	var v any = listOf(objects)
	if single && len(objects) == 1 {
		v = objects[0]
	}
	switch p.format {
	case outputJSON, outputYAML:
		return printData(w, p.format, v)
	case outputJSONPath:
		data, err := genericObject(v)
		if err != nil {
			return err
		}
		if err := p.template.Execute(w, data); err != nil {
			return fmt.Errorf("error executing jsonpath: %w", err)
		}
		return nil
	}
	return printColumns(w, p.columns, objects)
}

// printColumns prints one row per object, each cell the values its
// column's path finds (comma-separated), or <none>.
func printColumns(w io.Writer, cols []column, objects []any) error {
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = c.header
	}
	t := newTable(w, headers...)
	for _, o := range objects {
		data, err := genericObject(o)
		if err != nil {
			return err
		}
		cells := make([]string, len(cols))
		for i, c := range cols {
			if cells[i], err = columnCell(c, data); err != nil {
				return err
			}
		}
		t.row(cells...)
	}
	return t.flush()
}

func columnCell(c column, data any) (string, error) {
	results, err := c.path.FindResults(data)
	if err != nil {
		return "", fmt.Errorf("column %s: %w", c.header, err)
	}
	var values []string
	for _, r := range results {
		for _, v := range r {
			values = append(values, fmt.Sprint(v.Interface()))
		}
	}
	if len(values) == 0 {
		return "<none>", nil
	}
	return strings.Join(values, ","), nil
}

// sortObjects returns v (a slice that fetchObjects returned for kind)
// ordered by the value that the JSONPath path finds in each object's
// manifest shape, as kubectl's --sort-by: numbers by value, strings in
// natural order, objects without the field first. It is an error if no
// object has the field.
func sortObjects(kind string, v any, path string) (any, error) {
	expr, err := relaxedJSONPath(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--sort-by: %w", err)}
	}
	j, err := parseJSONPath("sort-by", expr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--sort-by: error parsing jsonpath %s: %w", path, err)}
	}
	objects := manifestObjects(kind, v)
	keys := make([]any, len(objects))
	found := false
	for i, o := range objects {
		data, err := genericObject(o)
		if err != nil {
			return nil, err
		}
		results, err := j.FindResults(data)
		if err != nil {
			return nil, fmt.Errorf("--sort-by %s: %w", path, err)
		}
		if len(results) > 0 && len(results[0]) > 0 {
			keys[i], found = results[0][0].Interface(), true
		}
	}
	if len(objects) > 0 && !found {
		return nil, fmt.Errorf("--sort-by: couldn't find any field with path %q in the list of objects", expr)
	}
	order := make([]int, len(objects))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareKeys(keys[a], keys[b]) })
	in := reflect.ValueOf(v)
	out := reflect.MakeSlice(in.Type(), in.Len(), in.Len())
	for i, from := range order {
		out.Index(i).Set(in.Index(from))
	}
	return out.Interface(), nil
}

// compareKeys orders sort keys: missing (nil) first, then numbers, then
// booleans (false first), then strings in natural order; other values by
// their printed form.
func compareKeys(a, b any) int {
	ra, rb := keyRank(a), keyRank(b)
	if ra != rb {
		return ra - rb
	}
	switch a := a.(type) {
	case nil:
		return 0
	case int64, float64:
		return cmp.Compare(toFloat(a), toFloat(b))
	case bool:
		if a == b.(bool) {
			return 0
		}
		if !a {
			return -1
		}
		return 1
	case string:
		return naturalCompare(a, b.(string))
	}
	return naturalCompare(fmt.Sprint(a), fmt.Sprint(b))
}

func keyRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case int64, float64:
		return 1
	case bool:
		return 2
	case string:
		return 3
	}
	return 4
}

func toFloat(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}

// naturalCompare compares strings with runs of digits compared as
// numbers, so gw-2 sorts before gw-10 (kubectl sorts strings so too).
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
