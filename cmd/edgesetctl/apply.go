package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func newApplyCmd(s *streams) *cobra.Command {
	var paths []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-f ...]",
		Short: "Create or update daemonsets from manifests",
		Long: `Apply sends DaemonSet manifests (apps/v1 or edgeset.io/v1; YAML, multi-document
YAML, JSON or kind: List) to the controller. A directory is read recursively.
Unchanged manifests are a no-op. The manifests are validated locally first;
nothing of a file is applied when any object in it is invalid.`,
		Example: `  edgesetctl apply -f configs/examples/
  edgesetctl apply -f node-exporter.yaml --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(paths) == 0 {
				return usageError{errors.New("apply: at least one -f FILE|DIR|- is required")}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			return cfg.explain(apply(cmd, s, c, paths, dryRun))
		},
	}
	cmd.Flags().StringArrayVarP(&paths, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change without changing anything")
	return cmd
}

// manifestSource is one file's content to apply.
type manifestSource struct {
	name string
	data []byte
}

// readManifests expands paths (files, directories, -) into file contents,
// validating each locally so problems are reported with file and line
// before anything is sent.
func readManifests(s *streams, paths []string) ([]manifestSource, error) {
	var out []manifestSource
	var problems int
	for _, p := range paths {
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			src, err := readSource(s.in, f)
			if err != nil {
				return nil, err
			}
			if _, warnings, err := schema.Decode(src.name, src.data); err != nil {
				problems += printProblems(s.err, err)
				continue
			} else {
				for _, w := range warnings {
					fmt.Fprintf(s.err, "warning: %s\n", w.String())
				}
			}
			out = append(out, src)
		}
	}
	if problems > 0 {
		return nil, errReported
	}
	return out, nil
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

func apply(cmd *cobra.Command, s *streams, c *api.Client, paths []string, dryRun bool) error {
	srcs, err := readManifests(s, paths)
	if err != nil {
		return err
	}
	suffix := ""
	if dryRun {
		suffix = " (dry run)"
	}
	for _, src := range srcs {
		results, err := c.Apply(cmd.Context(), src.name, src.data, dryRun)
		if err != nil {
			return fmt.Errorf("apply %s: %w", src.name, err)
		}
		for _, r := range results {
			fmt.Fprintf(s.out, "daemonset/%s %s%s\n", r.Key, r.Action, suffix)
		}
	}
	return nil
}
