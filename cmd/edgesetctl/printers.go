package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Output formats of get.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

func checkOutput(o string) error {
	switch o {
	case outputTable, outputWide, outputJSON, outputYAML, outputName:
		return nil
	}
	return usageError{fmt.Errorf("unknown output format %q: want wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH[,HEADER:PATH]", o)}
}

// printData prints v as indented JSON or as YAML.
func printData(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// cellEscaper keeps a cell on its row: a termination message taken from a
// container's log (FallbackToLogsOnError) or an engine error may hold line
// breaks and tabs, which would otherwise start a new row or column.
var cellEscaper = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\r`, "\t", " ")

// oneLine returns c without trailing line breaks, its inner ones as \n.
func oneLine(c string) string {
	if !strings.ContainsAny(c, "\r\n\t") {
		return c
	}
	return cellEscaper.Replace(strings.TrimRight(c, "\r\n"))
}

func (t *table) flush() error { return t.tw.Flush() }

// age formats the time from since to now as kubectl does: 42s, 5m, 3h,
// 12d.
func age(since, now time.Time) string {
	if since.IsZero() {
		return "<unknown>"
	}
	d := now.Sub(since)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func agePtr(t *time.Time, now time.Time) string {
	if t == nil {
		return "<never>"
	}
	return age(*t, now)
}

// mapString renders a map as k=v,k=v sorted, or <none>.
func mapString(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func shortHash(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

// headerSkipper drops the first line written through it: a table's
// header, for --no-headers.
type headerSkipper struct {
	w       io.Writer
	skipped bool
}

func (h *headerSkipper) Write(p []byte) (int, error) {
	if h.skipped {
		return h.w.Write(p)
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return len(p), nil
	}
	h.skipped = true
	if _, err := h.w.Write(p[i+1:]); err != nil {
		return 0, err
	}
	return len(p), nil
}
