package main

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// Resource kinds, with kubectl's singular, plural and short names.
const (
	kindNode      = "node"
	kindDaemonSet = "daemonset"
	kindInstance  = "instance"
)

var resourceNames = map[string]string{
	"node": kindNode, "nodes": kindNode, "no": kindNode,
	"daemonset": kindDaemonSet, "daemonsets": kindDaemonSet, "ds": kindDaemonSet,
	"instance": kindInstance, "instances": kindInstance, "inst": kindInstance,
	"source": kindSource, "sources": kindSource,
}

// resourceKind resolves a resource name, allowing kind/name.
func resourceKind(arg string) (kind, name string, err error) {
	res, name, _ := strings.Cut(arg, "/")
	kind, ok := resourceNames[strings.ToLower(res)]
	if !ok {
		return "", "", usageError{fmt.Errorf("unknown resource type %q: want nodes (no), daemonsets (ds), configmaps (cm), secrets, instances or sources", res)}
	}
	return kind, name, nil
}

// listOptions are the flags that select and print objects.
type listOptions struct {
	output    string
	namespace string
	all       bool
	selector  string
	sortBy    string
	noHeaders bool
	watch     bool
	// printer is output parsed.
	printer printer
	// showValues asks the controller for Secrets' values.
	showValues bool
}

func (o *listOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", schema.DefaultNamespace, "namespace of daemonsets, configmaps and secrets")
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "objects of every namespace")
	cmd.Flags().BoolVar(&o.showValues, "show-values", false, "include Secrets' values (base64) in -o json|yaml; any API token may ask")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", selectorHelp)
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "tables and custom-columns without their header line")
	cmd.Flags().StringVar(&o.sortBy, "sort-by", "", "sort lists by the value of this JSONPath in each object's manifest (-o json), e.g. '{.metadata.name}'")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "poll every second and print again on every change (until interrupted)")
}

func newGetCmd(s *streams) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "get (nodes|daemonsets|configmaps|secrets|instances|sources) [NAME]",
		Short: "List nodes, daemonsets, configmaps, secrets, instances or watched manifest files (sources)",
		Example: `  edgesetctl get nodes -l site=berlin
  edgesetctl get nodes -l 'site in (berlin,paris),!maintenance'
  edgesetctl get nodes -o jsonpath='{.items[*].metadata.name}'
  edgesetctl get nodes -o custom-columns=NAME:.metadata.name,ARCH:.status.nodeInfo.architecture --sort-by=.metadata.labels.site
  edgesetctl get ds node-exporter -n monitoring -o yaml > ds.yaml   # edit, then: edgesetctl apply -f ds.yaml
  edgesetctl get ds -A -o wide
  edgesetctl get cm -n edge
  edgesetctl get secret api-key -n edge -o yaml          # keys and sizes
  edgesetctl get secret api-key -n edge -o yaml --show-values
  edgesetctl get daemonset node-exporter -o yaml
  edgesetctl get instances
  edgesetctl get ds -A --watch`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := resourceKind(args[0])
			if err != nil {
				return err
			}
			if len(args) == 2 {
				name = args[1]
			}
			if o.printer, err = parsePrinter(o.output); err != nil {
				return err
			}
			sel, err := parseSelector(o.selector)
			if err != nil {
				return err
			}
			if len(sel) > 0 && (kind == kindInstance || kind == kindSource) {
				return usageError{fmt.Errorf("--selector: %ss have no labels; select nodes, daemonsets, configmaps or secrets", kind)}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			fetch := func(ctx context.Context) (any, error) { return fetchObjects(ctx, c, kind, name, o, sel) }
			single := name != "" && kind != kindInstance
			show := func(w io.Writer, v any) error { return printObjects(w, s.err, kind, o, single, v, s.now()) }
			if o.watch {
				return cfg.explain(watchObjects(cmd.Context(), s, o.output, fetch, show))
			}
			v, err := fetch(cmd.Context())
			if err != nil {
				return cfg.explain(err)
			}
			return show(s.out, v)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// fetchObjects lists the objects of kind that name, o and sel select: a
// []api.Node, []api.DaemonSet, []api.ConfigMap, []api.Secret,
// []api.Instance or []api.Source.
func fetchObjects(ctx context.Context, c *api.Client, kind, name string, o listOptions, sel selector) (any, error) {
	switch kind {
	case kindNode:
		nodes, err := c.ListNodes(ctx)
		if err != nil {
			return nil, err
		}
		nodes = filterNodes(nodes, name, sel)
		if name != "" && len(nodes) == 0 {
			return nil, fmt.Errorf("node %q: %w", name, api.ErrNotFound)
		}
		return nodes, nil
	case kindDaemonSet:
		dss, err := c.ListDaemonSets(ctx)
		if err != nil {
			return nil, err
		}
		dss = filterDaemonSets(dss, name, o, sel)
		if name != "" && len(dss) == 0 {
			return nil, fmt.Errorf("daemonset %s/%s: %w", o.namespace, name, api.ErrNotFound)
		}
		return dss, nil
	case kindSource:
		return fetchSources(ctx, c, name)
	case kindConfigMap:
		return fetchConfigMaps(ctx, c, name, o, sel)
	case kindSecret:
		return fetchSecrets(ctx, c, name, o, sel)
	default:
		ins, err := c.ListInstances(ctx)
		if err != nil {
			return nil, err
		}
		return filterInstances(ins, name, o), nil
	}
}

// printObjects prints what fetchObjects returned for kind, sorted by
// --sort-by: as manifests (one object if single, else a List) or as
// edgeset's table, its ages measured at now. An empty list in a format for
// people prints kubectl's "No resources found" on errw instead.
func printObjects(w, errw io.Writer, kind string, o listOptions, single bool, v any, now time.Time) error {
	if o.sortBy != "" {
		var err error
		if v, err = sortObjects(kind, v, o.sortBy); err != nil {
			return err
		}
	}
	if reflect.ValueOf(v).Len() == 0 && o.printer.humanReadable() {
		return noResources(errw, kind, o)
	}
	if o.noHeaders && o.printer.humanReadable() && o.printer.format != outputName {
		w = &headerSkipper{w: w}
	}
	if o.printer.manifests() {
		return printManifests(w, o.printer, manifestObjects(kind, v), single)
	}
	switch kind {
	case kindNode:
		return printNodes(w, o.output, v.([]api.Node), now)
	case kindDaemonSet:
		return printDaemonSets(w, o.output, v.([]api.DaemonSet), o.all, now)
	case kindSource:
		return printSources(w, o.output, v.([]api.Source), now)
	case kindConfigMap:
		return printConfigMaps(w, o.output, v.([]api.ConfigMap), o.all, now)
	case kindSecret:
		return printSecrets(w, o.output, v.([]api.Secret), o.all, now)
	default:
		return printInstances(w, o.output, v.([]api.Instance))
	}
}

// noResources says, as kubectl does, that nothing matched: "No resources
// found in NS namespace." for namespaced kinds without -A.
func noResources(w io.Writer, kind string, o listOptions) error {
	if o.all || kind == kindNode || kind == kindSource {
		_, err := fmt.Fprintln(w, "No resources found")
		return err
	}
	_, err := fmt.Fprintf(w, "No resources found in %s namespace.\n", o.namespace)
	return err
}

func filterNodes(nodes []api.Node, name string, sel selector) []api.Node {
	return slices.DeleteFunc(nodes, func(n api.Node) bool {
		return (name != "" && n.Name != name) || !sel.Matches(n.Labels)
	})
}

func filterDaemonSets(dss []api.DaemonSet, name string, o listOptions, sel selector) []api.DaemonSet {
	return slices.DeleteFunc(dss, func(d api.DaemonSet) bool {
		return (!o.all && d.Namespace != o.namespace) || (name != "" && d.Name != name) || !sel.Matches(d.Manifest.Metadata.Labels)
	})
}

// filterInstances keeps the instances of one namespace (all with -A); a
// name selects the instances of one daemonset.
func filterInstances(ins []api.Instance, name string, o listOptions) []api.Instance {
	return slices.DeleteFunc(ins, func(in api.Instance) bool {
		ns, dsName, _ := strings.Cut(in.DaemonSet, "/")
		return (!o.all && ns != o.namespace) || (name != "" && dsName != name)
	})
}

// nodeStatus renders a node's Ready condition as kubectl does.
func nodeStatus(n api.Node) string {
	status := "Unknown"
	if c := n.Condition(schema.NodeReady); c != nil {
		switch c.Status {
		case schema.ConditionTrue:
			status = "Ready"
		case schema.ConditionFalse:
			status = "NotReady"
		}
	}
	if n.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

func printNodes(w io.Writer, format string, nodes []api.Node, now time.Time) error {
	switch format {
	case outputJSON, outputYAML:
		return printManifests(w, printer{format: format}, manifestObjects(kindNode, nodes), false)
	case outputName:
		for _, n := range nodes {
			fmt.Fprintf(w, "node/%s\n", n.Name)
		}
		return nil
	}
	headers := []string{"NAME", "STATUS", "ONLINE", "LAST SEEN", "AGENT"}
	if format == outputWide {
		headers = append(headers, "OS/ARCH", "RUNTIME", "TAINTS", "LABELS")
	}
	t := newTable(w, headers...)
	for _, n := range nodes {
		cells := []string{n.Name, nodeStatus(n), yesNo(n.Online), agePtr(n.LastSeen, now), orNone(n.Info.AgentVersion)}
		if format == outputWide {
			cells = append(cells, n.Info.OS+"/"+n.Info.Arch, orNone(strings.TrimSpace(n.Info.Runtime+" "+n.Info.RuntimeVersion)),
				strconv.Itoa(len(n.Taints)), mapString(n.Labels))
		}
		t.row(cells...)
	}
	return t.flush()
}

func printDaemonSets(w io.Writer, format string, dss []api.DaemonSet, withNamespace bool, now time.Time) error {
	switch format {
	case outputJSON, outputYAML:
		return printManifests(w, printer{format: format}, manifestObjects(kindDaemonSet, dss), false)
	case outputName:
		for _, d := range dss {
			fmt.Fprintf(w, "daemonset/%s\n", d.Name)
		}
		return nil
	}
	var headers []string
	if withNamespace {
		headers = append(headers, "NAMESPACE")
	}
	headers = append(headers, "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "OFFLINE", "NODE SELECTOR", "AGE")
	if format == outputWide {
		headers = append(headers, "CONTAINERS", "IMAGES", "REVISION", "STRATEGY")
	}
	t := newTable(w, headers...)
	for _, d := range dss {
		t.row(daemonSetRow(d, withNamespace, format == outputWide, now)...)
	}
	return t.flush()
}

func daemonSetRow(d api.DaemonSet, withNamespace, wide bool, now time.Time) []string {
	st := d.Status
	var cells []string
	if withNamespace {
		cells = append(cells, d.Namespace)
	}
	cells = append(cells, d.Name,
		strconv.Itoa(st.DesiredNumberScheduled), strconv.Itoa(st.CurrentNumberScheduled), strconv.Itoa(st.NumberReady),
		strconv.Itoa(st.UpdatedNumberScheduled), strconv.Itoa(st.NumberAvailable), strconv.Itoa(st.NodesOffline),
		mapString(d.Manifest.Spec.Template.Spec.NodeSelector), age(d.CreatedAt, now))
	if wide {
		var names, images []string
		for _, c := range d.Manifest.Spec.Template.Spec.Containers {
			names, images = append(names, c.Name), append(images, c.Image)
		}
		strategy := schema.RollingUpdateStrategy
		if st.Rollout != nil {
			strategy = st.Rollout.Strategy
		}
		cells = append(cells, strings.Join(names, ","), strings.Join(images, ","), strconv.FormatInt(d.CurrentRevision, 10), strategy)
	}
	return cells
}

func printInstances(w io.Writer, format string, ins []api.Instance) error {
	switch format {
	case outputJSON, outputYAML:
		return printManifests(w, printer{format: format}, manifestObjects(kindInstance, ins), false)
	case outputName:
		for _, in := range ins {
			fmt.Fprintf(w, "instance/%s@%s\n", in.DaemonSet, in.Node)
		}
		return nil
	}
	headers := []string{"NODE", "DAEMONSET", "REVISION", "PHASE", "READY", "RESTARTS", "ONLINE"}
	if format == outputWide {
		headers = append(headers, "MESSAGE")
	}
	t := newTable(w, headers...)
	for _, in := range ins {
		phase := in.Phase
		if in.UpdateLock != nil {
			phase += " (locked)"
		}
		cells := []string{in.Node, in.DaemonSet, shortHash(in.Revision), phase, yesNo(in.Ready), strconv.Itoa(int(in.Restarts)), yesNo(in.Online)}
		if format == outputWide {
			cells = append(cells, orNone(instanceMessage(in)))
		}
		t.row(cells...)
	}
	return t.flush()
}
