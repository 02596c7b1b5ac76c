package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/schema"
	"github.com/spf13/cobra"
)

// stdinName is how problems read from standard input are attributed.
const stdinName = "<stdin>"

func newValidateCmd(s *streams) *cobra.Command {
	var (
		paths  []string
		strict bool
	)
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|- [-f ...] [--strict]",
		Short: "Validate DaemonSet, ConfigMap and Secret manifests offline",
		Long: `Validate decodes manifests (DaemonSets, ConfigMaps and Secrets in YAML,
multi-document YAML, JSON, kind: List) exactly as the controller does,
without contacting it. A directory is searched recursively for *.yaml,
*.yml and *.json files; "-" reads standard input.

Every problem is printed to standard error as "file:line: field: message",
and fields that Kubernetes knows but an edge device does not honour as
warnings, each saying what the daemon loses. With --strict, a warning about
a field whose loss changes what the daemon gets (a dropped volume, mount or
security setting) is an error instead, for CI; fields that need the
Kubernetes API by nature (service accounts, priority classes, server-set
metadata) stay warnings. When there are no problems, each object is
summarised on standard output. The exit code is 1 when any problem was
found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(paths) == 0 {
				return usageError{errors.New("validate: at least one -f FILE|DIR|- is required")}
			}
			return validate(s, paths, strict)
		},
	}
	cmd.Flags().StringArrayVarP(&paths, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings about fields whose loss changes the daemon as errors")
	return cmd
}

// report is one line of validate's problem output.
type report struct {
	file string
	line int
	text string
}

// validateResult accumulates what validate found over all inputs.
type validateResult struct {
	strict   bool     // meaning-changing warnings are problems
	files    []string // in input order, for sorting reports
	objects  []schema.Object
	reports  []report
	problems int
}

// validate decodes every path and prints its problems, warnings and, when
// everything is valid, one summary per object.
func validate(s *streams, paths []string, strict bool) error {
	res := validateResult{strict: strict}
	for _, p := range paths {
		if err := res.addPath(s.in, p); err != nil {
			return err
		}
	}
	res.print(s.err)
	if res.problems > 0 {
		fmt.Fprintf(s.err, "%s found\n", plural(res.problems, "problem"))
		return errReported
	}
	if len(res.objects) == 0 {
		return fmt.Errorf("validate: no objects found in %s", describePaths(paths))
	}
	for _, o := range res.objects {
		fmt.Fprintln(s.out, summary(o))
	}
	return nil
}

// addPath decodes "-" (stdin), a file, or the manifests of a directory.
func (r *validateResult) addPath(stdin io.Reader, path string) error {
	if path == "-" {
		data, err := io.ReadAll(io.LimitReader(stdin, schema.MaxManifestSize+1))
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		r.files = append(r.files, stdinName)
		r.add(stdinName, func() ([]schema.Object, []schema.Warning, error) { return schema.Decode(stdinName, data) })
		return nil
	}
	files, err := schema.ManifestFiles(path)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("validate: no *.yaml, *.yml or *.json files in %s", path)
	}
	for _, f := range files {
		r.files = append(r.files, f)
		r.add(f, func() ([]schema.Object, []schema.Warning, error) { return schema.DecodeFile(f) })
	}
	return nil
}

// add records the outcome of one decode.
func (r *validateResult) add(file string, decode func() ([]schema.Object, []schema.Warning, error)) {
	objs, warns, err := decode()
	r.objects = append(r.objects, objs...)
	for _, w := range warns {
		if r.strict && w.ChangesDaemon() {
			r.reports = append(r.reports, report{w.File, w.Line, w.String()})
			r.problems++
			continue
		}
		r.reports = append(r.reports, report{w.File, w.Line, "warning: " + w.String()})
	}
	var ve *schema.ValidationError
	switch {
	case errors.As(err, &ve):
		for _, fe := range ve.Errors {
			r.reports = append(r.reports, report{fe.File, fe.Line, fe.Error()})
		}
		r.problems += len(ve.Errors)
	case err != nil:
		r.reports = append(r.reports, report{file, 0, err.Error()})
		r.problems++
	}
}

// print writes the reports ordered by input file, then line.
func (r *validateResult) print(w io.Writer) {
	rank := func(file string) int { return slices.Index(r.files, file) }
	slices.SortStableFunc(r.reports, func(a, b report) int {
		if d := rank(a.file) - rank(b.file); d != 0 {
			return d
		}
		return a.line - b.line
	})
	for _, rep := range r.reports {
		fmt.Fprintln(w, rep.text)
	}
}

// summary describes a valid object in one line, for example
// "daemonset kube-system/fluentd valid (apps/v1, 1 container, RollingUpdate)",
// "configmap logging/fluent-bit valid (v1, 2 keys)" or
// "secret default/registry valid (v1, kubernetes.io/dockerconfigjson, 1 key)".
// Secret values are never printed.
func summary(o schema.Object) string {
	switch {
	case o.ConfigMap != nil:
		cm := o.ConfigMap
		return fmt.Sprintf("configmap %s valid (%s, %s)", cm.Key(), cm.APIVersion, plural(len(cm.Data)+len(cm.BinaryData), "key"))
	case o.Secret != nil:
		sec := o.Secret
		return fmt.Sprintf("secret %s valid (%s, %s, %s)", sec.Key(), sec.APIVersion, sec.Type, plural(len(sec.Data), "key"))
	}
	ds := o.DaemonSet
	containers := plural(len(ds.Spec.Template.Spec.Containers), "container")
	if n := len(ds.Spec.Template.Spec.InitContainers); n > 0 {
		containers += ", " + plural(n, "init container")
	}
	return fmt.Sprintf("daemonset %s valid (%s, %s, %s)",
		ds.Key(), ds.APIVersion, containers, ds.Spec.UpdateStrategy.Type)
}

// describePaths lists paths for a message, naming "-" standard input.
func describePaths(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = p
		if p == "-" {
			names[i] = "standard input"
		}
	}
	return strings.Join(names, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
