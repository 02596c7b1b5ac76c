package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

func newExplainCmd(s *streams) *cobra.Command {
	var dsPath, nodePath, output, nodeName, namespace string
	cmd := &cobra.Command{
		Use:   "explain (daemonset NAME | -f DAEMONSET.yaml --node-file NODES.yaml) [--node NODE] [-o json]",
		Short: "Explain on which nodes a daemonset runs (live) or would run (offline), and why",
		Long: `Explain daemonset NAME asks the controller, for every node of the fleet (or
the one --node names), whether the daemon should run there, whether it does
(the instance's phase as its agent reports it) and the placement reasons:
"why is (or isn't) this daemon running on that node?".

Offline, with -f and --node-file, explain decides placement exactly as the
controller does, without contacting it: for each node of the node file,
whether the daemon would be started, whether an instance already there would
keep running, and why not.

The node file holds Kubernetes v1 Node manifests (kind Node, or a List or
NodeList of them, as "kubectl get nodes -o yaml" exports) or edgeset's own
node model, so placement can be checked against a real cluster export.
-o json prints a stable list of {node, daemonset, run, keepRunning, reasons}.`,
		Example: `  edgesetctl explain daemonset node-exporter -n monitoring
  edgesetctl explain ds fluentd-elasticsearch -n kube-system --node gw-1
  edgesetctl explain -f node-exporter.yaml --node-file nodes.yaml
  kubectl get nodes -o yaml > nodes.yaml && edgesetctl explain -f ds.yaml --node-file nodes.yaml -o json`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != outputJSON {
				return usageError{fmt.Errorf("unknown output format %q: want json", output)}
			}
			if len(args) > 0 {
				if dsPath != "" || nodePath != "" {
					return usageError{errors.New("explain: give either daemonset NAME (live) or -f and --node-file (offline), not both")}
				}
				key, err := daemonSetKey(args, namespace)
				if err != nil {
					return err
				}
				c, cfg, err := newAPIClient(cmd)
				if err != nil {
					return err
				}
				return cfg.explain(explainLive(cmd.Context(), c, s.out, key, nodeName, output))
			}
			if dsPath == "" || nodePath == "" {
				return usageError{errors.New("explain: want daemonset NAME (live), or both -f DAEMONSET and --node-file NODES (offline)")}
			}
			return explainOffline(s, dsPath, nodePath, nodeName, output)
		},
	}
	cmd.Flags().StringVarP(&dsPath, "filename", "f", "", "daemonset manifest file, or - for stdin")
	cmd.Flags().StringVar(&nodePath, "node-file", "", "nodes: Kubernetes v1 Node/NodeList/List, or edgeset nodes")
	cmd.Flags().StringVar(&nodeName, "node", "", "explain only this node")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset (live)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for machine-readable output")
	return cmd
}

func explainOffline(s *streams, dsPath, nodePath, nodeName, output string) error {
	src, err := readSource(s.in, dsPath)
	if err != nil {
		return err
	}
	objs, _, err := schema.Decode(src.name, src.data)
	if err != nil {
		printProblems(s.err, err)
		return errReported
	}
	nodes, err := schema.DecodeNodesFile(nodePath)
	if err != nil {
		printProblems(s.err, err)
		return errReported
	}
	if nodeName != "" {
		nodes = filterNodeModels(nodes, nodeName)
		if len(nodes) == 0 {
			return fmt.Errorf("node %q is not in %s", nodeName, nodePath)
		}
	}
	var results []placement.Result
	for _, obj := range objs {
		if obj.DaemonSet == nil {
			continue // ConfigMaps and Secrets are not placed
		}
		r, err := placement.Explain(obj.DaemonSet, nodes, time.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", obj.Source, err)
		}
		results = append(results, r...)
	}
	if output == outputJSON {
		return printData(s.out, outputJSON, results)
	}
	return printExplain(s.out, results)
}

func filterNodeModels(nodes []schema.Node, name string) []schema.Node {
	for _, n := range nodes {
		if n.Name == name {
			return []schema.Node{n}
		}
	}
	return nil
}

func printExplain(w io.Writer, results []placement.Result) error {
	t := newTable(w, "NODE", "DAEMONSET", "RUN", "KEEP RUNNING", "REASONS")
	for _, r := range results {
		t.row(r.Node, r.DaemonSet, yesNo(r.Run), yesNo(r.KeepRunning), orNone(strings.Join(r.Reasons, "; ")))
	}
	return t.flush()
}

// daemonSetKey resolves the live form's arguments, "daemonset NAME",
// "ds/NAME" or "daemonset/NS/NAME", to "NS/NAME"; ns is -n.
func daemonSetKey(args []string, ns string) (string, error) {
	kind, name, err := resourceKind(args[0])
	if err != nil {
		return "", err
	}
	if kind != kindDaemonSet {
		return "", usageError{fmt.Errorf("explain: %q: only daemonsets are explained", args[0])}
	}
	switch {
	case len(args) == 2 && name != "":
		return "", usageError{fmt.Errorf("explain: name given twice: %q and %q", args[0], args[1])}
	case len(args) == 2:
		name = args[1]
	case name == "":
		return "", usageError{errors.New("explain: daemonset NAME: the name is missing")}
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	return ns + "/" + name, nil
}

// liveResult is the live answer for one node: whether the daemon should
// run there, whether it does and why.
type liveResult struct {
	Node        string   `json:"node"`
	DaemonSet   string   `json:"daemonset"`
	Online      bool     `json:"online"`
	Run         bool     `json:"run"`
	KeepRunning bool     `json:"keepRunning"`
	Phase       string   `json:"phase,omitempty"`
	Ready       bool     `json:"ready"`
	Revision    string   `json:"revision,omitempty"`
	Message     string   `json:"message,omitempty"`
	Reasons     []string `json:"reasons"`
}

// explainConcurrency bounds the node requests of a live explain.
const explainConcurrency = 8

// explainLive answers from the controller, for daemonset key on every node
// (or only nodeName): should it run, does it, and why.
func explainLive(ctx context.Context, c *api.Client, w io.Writer, key, nodeName, output string) error {
	if _, err := c.GetDaemonSet(ctx, key); err != nil {
		return err
	}
	names := []string{nodeName}
	if nodeName == "" {
		nodes, err := c.ListNodes(ctx)
		if err != nil {
			return err
		}
		names = make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		slices.Sort(names)
	}
	results := make([]liveResult, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(explainConcurrency)
	for i, name := range names {
		g.Go(func() error {
			n, err := c.GetNode(gctx, name)
			if err != nil {
				return err
			}
			results[i] = liveResultOf(n, key)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if output == outputJSON {
		return printData(w, outputJSON, results)
	}
	return printLiveExplain(w, results)
}

// noDecision is the reason given when the controller reports no placement
// of the daemonset for a node (an orphaned daemonset being deleted).
const noDecision = "no placement decision for this daemonset"

// liveResultOf picks daemonset key's placement and instance out of n.
func liveResultOf(n api.Node, key string) liveResult {
	r := liveResult{Node: n.Name, DaemonSet: key, Online: n.Online, Reasons: []string{noDecision}}
	for _, p := range n.Placement {
		if p.DaemonSet == key {
			r.Run, r.KeepRunning = p.Run, p.KeepRunning
			r.Reasons = append([]string{}, p.Reasons...)
		}
	}
	for _, in := range n.Instances {
		if in.DaemonSet == key {
			r.Phase, r.Ready, r.Revision, r.Message = in.Phase, in.Ready, in.Revision, in.Message
		}
	}
	return r
}

// verdict sums a live result up in a few words.
func (r liveResult) verdict() string {
	switch {
	case r.Run && r.Phase == "":
		return "should run, no instance yet"
	case r.Run && r.Ready:
		return "runs, ready"
	case r.Run:
		return "should run, not ready"
	case r.KeepRunning && r.Phase != "":
		return "kept (would not start)"
	case r.Phase != "":
		return "being removed"
	case r.KeepRunning:
		return "not placed (not evicted)"
	}
	return "not placed"
}

// printLiveExplain prints live results as a table.
func printLiveExplain(w io.Writer, results []liveResult) error {
	t := newTable(w, "NODE", "ONLINE", "SHOULD RUN", "INSTANCE", "READY", "VERDICT", "REASONS", "MESSAGE")
	for _, r := range results {
		t.row(r.Node, yesNo(r.Online), yesNo(r.Run), orNone(r.Phase), yesNo(r.Ready), r.verdict(),
			orNone(strings.Join(r.Reasons, "; ")), orNone(r.Message))
	}
	return t.flush()
}
