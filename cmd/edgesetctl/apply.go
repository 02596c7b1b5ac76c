package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func newApplyCmd(s *streams) *cobra.Command {
	var paths []string
	var dryRun dryRunValue
	var prune bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-f ...]",
		Short: "Create or update daemonsets, configmaps and secrets from manifests",
		Long: `Apply sends DaemonSet manifests (apps/v1 or edgeset.io/v1), v1 ConfigMaps and v1
Secrets (YAML, multi-document YAML, JSON or kind: List) to the controller. A
directory is read recursively. Unchanged manifests are a no-op. The manifests
are validated locally first; nothing of a file is applied when any object in
it is invalid, and the objects of one file land together or not at all.

Every object applied from -f PATH records the source "cli:PATH" (PATH made
absolute; see edgesetctl get ds -o yaml). With --prune, after applying, the
daemonsets, configmaps and secrets whose source is "cli:PATH" or lies below
it ("cli:PATH/...") and that this apply did not name are deleted: remove a
file from the directory, apply the directory again with --prune, and its
objects go. Objects applied another way (by hand, from another path, or from
the controller's manifests-dir) are never pruned. --prune does not take
stdin.

--dry-run=server has the controller run the whole apply (validation,
placement, every object of a file in one store transaction) and roll it
back: it says exactly what would be created, configured or unchanged.
--dry-run=client validates locally and only reads the controller, to say
whether each object would be created or configured. As in current
kubectl, --dry-run takes a value.`,
		Example: `  edgesetctl apply -f configs/examples/
  edgesetctl apply -f node-exporter.yaml --dry-run=server
  edgesetctl apply -f deploy/ --prune --dry-run=client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(paths) == 0 {
				return usageError{errors.New("apply: at least one -f FILE|DIR|- is required")}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			if prune && slices.Contains(paths, "-") {
				return usageError{errors.New("apply: --prune needs -f FILE|DIR, not - (stdin)")}
			}
			return cfg.explain(apply(cmd, s, c, paths, applyFlags{dryRun: &dryRun, prune: prune}))
		},
	}
	cmd.Flags().StringArrayVarP(&paths, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	addDryRunFlag(cmd.Flags(), &dryRun)
	cmd.Flags().BoolVar(&prune, "prune", false, "delete objects applied earlier from the same -f path that this apply does not name")
	return cmd
}

// manifestSource is one file's content to apply.
type manifestSource struct {
	name string
	data []byte
	// owner is the source recorded on the daemonsets applied: "cli:" and
	// the absolute -f argument; empty for stdin.
	owner string
}

// cliOwner is the source recorded on daemonsets applied from -f path.
func cliOwner(path string) (string, error) {
	if path == "-" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	return "cli:" + abs, nil
}

// readManifests expands paths (files, directories, -) into file contents,
// validating each locally so problems are reported with file and line
// before anything is sent.
//
// With unique (apply, diff), an object declared in two of the files is
// refused, naming both places: each file is its own request, so the
// controller, which refuses an object declared twice in one request, would
// apply both, one after the other, on every apply.
func readManifests(s *streams, paths []string, unique bool) ([]manifestSource, error) {
	var out []manifestSource
	var problems int
	seen := map[string]schema.Source{}
	for _, p := range paths {
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		owner, err := cliOwner(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			src, err := readSource(s.in, f)
			if err != nil {
				return nil, err
			}
			src.owner = owner
			objs, warnings, err := schema.Decode(src.name, src.data)
			if err != nil {
				problems += printProblems(s.err, err)
				continue
			}
			for _, w := range warnings {
				fmt.Fprintf(s.err, "warning: %s\n", w.String())
			}
			if unique {
				problems += declaredTwice(s.err, seen, objs)
			}
			out = append(out, src)
		}
	}
	if problems > 0 {
		return nil, errReported
	}
	return out, nil
}

// declaredTwice prints, for each of objs that an earlier file declared
// (seen, by kind and key, which it extends), where both are, and returns
// how many there were. Duplicates within one file are the controller's to
// refuse, with the same message.
func declaredTwice(w io.Writer, seen map[string]schema.Source, objs []schema.Object) int {
	n := 0
	local := map[string]bool{}
	for _, o := range objs {
		key := refOf(o).String()
		if first, dup := seen[key]; dup && !local[key] {
			fmt.Fprintf(w, "%s: metadata.name: %s is declared twice, here and at %s; declare each object once\n", o.Source, key, first)
			n++
			continue
		}
		if !local[key] {
			seen[key], local[key] = o.Source, true
		}
	}
	return n
}

func manifestFiles(path string) ([]string, error) {
	if path == "-" {
		return []string{"-"}, nil
	}
	return schema.ManifestFiles(path)
}

func readSource(stdin io.Reader, path string) (manifestSource, error) {
	if path == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, schema.MaxManifestSize+1))
		return manifestSource{name: stdinName, data: b}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return manifestSource{}, fmt.Errorf("read %s: %w", path, err)
	}
	return manifestSource{name: path, data: b}, nil
}

// printProblems prints a validation error one problem per line and returns
// how many there were.
func printProblems(w io.Writer, err error) int {
	var verr *schema.ValidationError
	if errors.As(err, &verr) {
		for _, fe := range verr.Errors {
			fmt.Fprintln(w, fe.Error())
		}
		return len(verr.Errors)
	}
	fmt.Fprintln(w, err)
	return 1
}

// applyFlags are apply's options.
type applyFlags struct {
	dryRun *dryRunValue
	prune  bool
}

func apply(cmd *cobra.Command, s *streams, c *api.Client, paths []string, f applyFlags) error {
	srcs, err := readManifests(s, paths, true)
	if err != nil {
		return err
	}
	suffix := f.dryRun.suffix()
	applied := map[string]bool{}
	for _, src := range srcs {
		var results []api.ApplyResult
		if f.dryRun.mode == dryRunClient {
			results, err = clientDryRun(cmd.Context(), c, src)
		} else {
			results, err = c.ApplyWith(cmd.Context(), src.name, src.data, api.ApplyOptions{DryRun: f.dryRun.mode == dryRunServer, Source: src.owner})
		}
		if err != nil {
			return fmt.Errorf("apply %s: %w", src.name, err)
		}
		for _, r := range results {
			applied[resultObject(r)] = true
			fmt.Fprintf(s.out, "%s %s%s\n", resultObject(r), r.Action, suffix)
			if r.Message != "" {
				fmt.Fprintf(s.out, "  %s\n", r.Message)
			}
		}
	}
	if !f.prune {
		return nil
	}
	return pruneApplied(cmd.Context(), s, c, paths, applied, f.dryRun)
}

// clientDryRun says, for each object of src, whether applying it would
// create it or configure it, reading the controller only: whether it
// would be unchanged is the controller's to say (--dry-run=server).
func clientDryRun(ctx context.Context, c *api.Client, src manifestSource) ([]api.ApplyResult, error) {
	objs, _, err := schema.Decode(src.name, src.data)
	if err != nil {
		return nil, err
	}
	var out []api.ApplyResult
	for _, o := range objs {
		ref := refOf(o)
		err := ref.get(ctx, c)
		switch {
		case errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrNotController):
			out = append(out, api.ApplyResult{Kind: ref.kind, Key: ref.key, Action: api.ActionCreated})
		case err != nil:
			return nil, err
		default:
			out = append(out, api.ApplyResult{Kind: ref.kind, Key: ref.key, Action: api.ActionConfigured})
		}
	}
	return out, nil
}

// pruneApplied deletes the daemonsets, configmaps and secrets applied
// earlier from one of paths (their source is "cli:PATH" or below it) that
// applied does not name (by kind/namespace/name).
func pruneApplied(ctx context.Context, s *streams, c *api.Client, paths []string, applied map[string]bool, dryRun *dryRunValue) error {
	var owners []string
	for _, p := range paths {
		o, err := cliOwner(p)
		if err != nil {
			return err
		}
		owners = append(owners, o)
	}
	objs, err := prunable(ctx, c)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if applied[o.name] || !ownedByAny(o.source, owners) {
			continue
		}
		if dryRun.active() {
			fmt.Fprintf(s.out, "%s pruned%s\n", o.name, dryRun.suffix())
			continue
		}
		if err := o.delete(); err != nil && !errors.Is(err, api.ErrNotFound) {
			return fmt.Errorf("prune %s: %w", o.name, err)
		}
		fmt.Fprintf(s.out, "%s pruned\n", o.name)
	}
	return nil
}

// appliedObject is an object apply --prune may delete.
type appliedObject struct {
	name   string // kind/namespace/name
	source string
	delete func() error
}

// prunable lists every daemonset, configmap and secret with its source.
func prunable(ctx context.Context, c *api.Client) ([]appliedObject, error) {
	dss, err := c.ListDaemonSets(ctx)
	if err != nil {
		return nil, fmt.Errorf("list daemonsets to prune: %w", err)
	}
	cms, err := c.ListConfigMaps(ctx)
	if err != nil {
		return nil, fmt.Errorf("list configmaps to prune: %w", err)
	}
	secrets, err := c.ListSecrets(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("list secrets to prune: %w", err)
	}
	var out []appliedObject
	for _, d := range dss {
		key := d.Key()
		out = append(out, appliedObject{"daemonset/" + key, d.Source, func() error { return c.DeleteDaemonSet(ctx, key, false) }})
	}
	for _, cm := range cms {
		key := cm.Key()
		out = append(out, appliedObject{kindConfigMap + "/" + key, cm.Source, func() error { return c.DeleteConfigMap(ctx, key) }})
	}
	for _, sec := range secrets {
		key := sec.Key()
		out = append(out, appliedObject{kindSecret + "/" + key, sec.Source, func() error { return c.DeleteSecret(ctx, key) }})
	}
	return out, nil
}

// ownedByAny reports whether source is one of owners or lies below one.
func ownedByAny(source string, owners []string) bool {
	for _, o := range owners {
		if source == o || strings.HasPrefix(source, strings.TrimSuffix(o, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
