package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

func newExplainCmd(s *streams) *cobra.Command {
	var dsPath, nodePath, output, nodeName string
	cmd := &cobra.Command{
		Use:   "explain -f DAEMONSET.yaml --node-file NODES.yaml [-o json]",
		Short: "Explain, offline, on which nodes a daemonset would run and why",
		Long: `Explain decides placement exactly as the controller does, without contacting
it: for each node of the node file, whether the daemon would be started,
whether an instance already there would keep running, and why not.

The node file holds Kubernetes v1 Node manifests (kind Node, or a List or
NodeList of them, as "kubectl get nodes -o yaml" exports) or edgeset's own
node model, so placement can be checked against a real cluster export.
-o json prints a stable list of {node, daemonset, run, keepRunning, reasons}.`,
		Example: `  edgesetctl explain -f node-exporter.yaml --node-file nodes.yaml
  kubectl get nodes -o yaml > nodes.yaml && edgesetctl explain -f ds.yaml --node-file nodes.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dsPath == "" || nodePath == "" {
				return usageError{errors.New("explain: -f DAEMONSET and --node-file NODES are both required")}
			}
			if output != "" && output != outputJSON {
				return usageError{fmt.Errorf("unknown output format %q: want json", output)}
			}
			return explainOffline(s, dsPath, nodePath, nodeName, output)
		},
	}
	cmd.Flags().StringVarP(&dsPath, "filename", "f", "", "daemonset manifest file, or - for stdin")
	cmd.Flags().StringVar(&nodePath, "node-file", "", "nodes: Kubernetes v1 Node/NodeList/List, or edgeset nodes")
	cmd.Flags().StringVar(&nodeName, "node", "", "explain only this node")
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
