package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
)

// kindSource is the resource of `edgesetctl get sources`: the files of the
// controller's watched manifests directory (manifests-dir).
const kindSource = "source"

// fetchSources lists the watched manifest files; a name selects one path.
func fetchSources(ctx context.Context, c *api.Client, name string) ([]api.Source, error) {
	srcs, err := c.Sources(ctx)
	if err != nil {
		return nil, err
	}
	srcs = slices.DeleteFunc(srcs, func(s api.Source) bool { return name != "" && s.Path != name })
	if name != "" && len(srcs) == 0 {
		return nil, fmt.Errorf("source %q: %w (is it below the controller's manifests-dir?)", name, api.ErrNotFound)
	}
	return srcs, nil
}

// printSources prints sources as a table aged at now (wide adds the first
// problem of an invalid file), JSON, YAML or names.
func printSources(w io.Writer, format string, srcs []api.Source, now time.Time) error {
	switch format {
	case outputJSON, outputYAML:
		return printManifests(w, printer{format: format}, manifestObjects(kindSource, srcs), false)
	case outputName:
		for _, s := range srcs {
			fmt.Fprintf(w, "source/%s\n", s.Path)
		}
		return nil
	}
	headers := []string{"PATH", "STATUS", "DAEMONSETS", "LAST APPLIED", "ERRORS"}
	if format == outputWide {
		headers = append(headers, "CONFIGMAPS", "SECRETS", "FIRST ERROR")
	}
	t := newTable(w, headers...)
	for _, s := range srcs {
		cells := []string{s.Path, s.Status, orNone(strings.Join(s.DaemonSets, ",")), agePtr(s.LastApplied, now), strconv.Itoa(len(s.Errors))}
		if format == outputWide {
			first := ""
			if len(s.Errors) > 0 {
				first = s.Errors[0]
			}
			cells = append(cells, orNone(strings.Join(s.ConfigMaps, ",")), orNone(strings.Join(s.Secrets, ",")), orNone(first))
		}
		t.row(cells...)
	}
	return t.flush()
}
