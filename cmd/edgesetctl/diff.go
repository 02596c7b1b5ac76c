package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// errDiffers ends diff with exit code 1 when something would change; the
// differences are already printed.
var errDiffers = fmt.Errorf("differences found: %w", errReported)

func newDiffCmd(s *streams) *cobra.Command {
	var paths []string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|- [-f ...]",
		Short: "Show what applying manifests would change",
		Long: `Diff asks the controller what applying the manifests would do (a dry run) and
prints, for each daemonset that would be created or configured, the fields
that change ("- path: live value", "+ path: new value") and on how many of
the controller's current nodes placement puts it now and would after.
Unchanged daemonsets print nothing.

Exit status, as kubectl diff: 0 when nothing would change, 1 when something
would, 2 on any error (printed on stderr: a usage error, a file that cannot
be read, an invalid manifest, a controller that cannot be asked).`,
		Example: `  edgesetctl diff -f node-exporter.yaml
  edgesetctl diff -f configs/examples/ && echo "nothing to apply"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(paths) == 0 {
				return usageError{errors.New("diff: at least one -f FILE|DIR|- is required")}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return exitError{exitDiffError, err}
			}
			err = cfg.explain(diff(cmd.Context(), s, c, paths))
			if err != nil && !errors.Is(err, errDiffers) {
				return exitError{exitDiffError, err}
			}
			return err
		},
	}
	cmd.Flags().StringArrayVarP(&paths, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	return cmd
}

func diff(ctx context.Context, s *streams, c *api.Client, paths []string) error {
	srcs, err := readManifests(s, paths, true)
	if err != nil {
		return err
	}
	differs := false
	for _, src := range srcs {
		objs, _, err := schema.Decode(src.name, src.data)
		if err != nil {
			return err
		}
		results, err := c.ApplyWith(ctx, src.name, src.data, api.ApplyOptions{DryRun: true})
		if err != nil {
			return fmt.Errorf("diff %s: %w", src.name, err)
		}
		for i, r := range results {
			if r.Action == api.ActionUnchanged || i >= len(objs) {
				continue
			}
			differs = true
			if objs[i].DaemonSet == nil {
				if err := printConfigDiff(ctx, c, s.out, r, objs[i]); err != nil {
					return err
				}
				continue
			}
			var live *schema.DaemonSet
			if r.Action != api.ActionCreated {
				ds, err := c.GetDaemonSet(ctx, r.Key)
				if err != nil {
					return fmt.Errorf("diff %s: %w", r.Key, err)
				}
				live = &ds.Manifest
			}
			if err := printDiff(s.out, r, live, objs[i].DaemonSet); err != nil {
				return err
			}
		}
	}
	if differs {
		return errDiffers
	}
	return nil
}

// printDiff prints one daemonset's change: its action, node counts and the
// changed fields (live nil: every field is new).
func printDiff(w io.Writer, r api.ApplyResult, live, next *schema.DaemonSet) error {
	before, err := flatten(live)
	if err != nil {
		return err
	}
	after, err := flatten(next)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "daemonset/%s %s\n", r.Key, r.Action)
	if r.Message != "" {
		fmt.Fprintf(w, "  %s\n", r.Message)
	}
	fmt.Fprintf(w, "  nodes: %d now, %d after\n", r.NodesBefore, r.NodesAfter)
	for _, line := range fieldDiff(before, after) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	return nil
}

// fieldDiff lists, sorted by field path, "- path: old" and "+ path: new"
// for every leaf that differs.
func fieldDiff(before, after map[string]string) []string {
	paths := map[string]bool{}
	for p := range before {
		paths[p] = true
	}
	for p := range after {
		paths[p] = true
	}
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	slices.Sort(keys)
	var out []string
	for _, p := range keys {
		b, inBefore := before[p]
		a, inAfter := after[p]
		if inBefore && inAfter && a == b {
			continue
		}
		if inBefore {
			out = append(out, "- "+p+": "+b)
		}
		if inAfter {
			out = append(out, "+ "+p+": "+a)
		}
	}
	return out
}

// flatten maps every leaf of ds's JSON form to its JSON value, keyed by a
// field path such as spec.template.spec.containers[0].image.
func flatten(ds *schema.DaemonSet) (map[string]string, error) {
	out := map[string]string{}
	if ds == nil {
		return out, nil
	}
	b, err := json.Marshal(ds)
	if err != nil {
		return nil, fmt.Errorf("encode daemonset: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("decode daemonset: %w", err)
	}
	flattenInto(out, "", v)
	return out, nil
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func flattenInto(out map[string]string, path string, v any) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			out[path] = "{}"
		}
		for k, e := range v {
			p := path + "[" + strconv.Quote(k) + "]"
			if plainKey.MatchString(k) {
				p = k
				if path != "" {
					p = path + "." + k
				}
			}
			flattenInto(out, p, e)
		}
	case []any:
		if len(v) == 0 {
			out[path] = "[]"
		}
		for i, e := range v {
			flattenInto(out, path+"["+strconv.Itoa(i)+"]", e)
		}
	default:
		b, _ := json.Marshal(v)
		out[path] = string(b)
	}
}
