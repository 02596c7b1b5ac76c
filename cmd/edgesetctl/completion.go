package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// Shell completion (edgesetctl completion bash|zsh|fish|powershell, which
// cobra provides) of resource types and of the names of nodes,
// daemonsets, configmaps and secrets, asked from the controller with the
// command line's --server and token, as kubectl completes from its API
// server.

// typedCompletions lists, by command path, the resource types a "TYPE
// NAME" command takes first.
var typedCompletions = map[string][]string{
	"edgesetctl get":      {"nodes", "daemonsets", "configmaps", "secrets", "instances", "sources"},
	"edgesetctl describe": {"node", "daemonset", "configmap", "secret"},
	"edgesetctl delete":   {"daemonset", "configmap", "secret", "node", "instance"},
	"edgesetctl explain":  {"daemonset"},
	"edgesetctl label":    {"node"},
	"edgesetctl taint":    {"node"},
}

// nodeCompletions lists the commands whose first argument is a node name.
var nodeCompletions = []string{
	"edgesetctl cordon", "edgesetctl uncordon", "edgesetctl drain",
	"edgesetctl token create", "edgesetctl token revoke",
}

// addCompletions sets the completion of every command of root's tree that
// takes resource types or names and has none yet.
func addCompletions(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.ValidArgsFunction == nil {
			c.ValidArgsFunction = argsCompletion(c)
		}
		if c.Flags().Lookup("node") != nil {
			_ = c.RegisterFlagCompletionFunc("node", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return completeNames(cmd, kindNode, toComplete)
			})
		}
	}
	walk(root)
}

// argsCompletion returns the completion of c's arguments, or nil.
func argsCompletion(c *cobra.Command) cobra.CompletionFunc {
	path := c.CommandPath()
	if types, ok := typedCompletions[path]; ok {
		return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return withPrefix(types, toComplete), cobra.ShellCompDirectiveNoFileComp
			case 1:
				kind, _, err := resourceKind(args[0])
				if err != nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeNames(cmd, kind, toComplete)
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
	for _, p := range nodeCompletions {
		if p == path {
			return firstArg(kindNode)
		}
	}
	switch {
	case path == "edgesetctl logs":
		return firstArg(kindDaemonSet)
	case strings.HasPrefix(path, "edgesetctl rollout "):
		types := []string{"daemonset"}
		return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch {
			case len(args) == 0:
				return withPrefix(types, toComplete), cobra.ShellCompDirectiveNoFileComp
			case len(args) == 1:
				return completeNames(cmd, kindDaemonSet, toComplete)
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
	return nil
}

// firstArg completes the first argument with names of kind.
func firstArg(kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeNames(cmd, kind, toComplete)
	}
}

// completeNames lists the names of kind starting with prefix: nodes, or the
// daemonsets, configmaps or secrets of the command's -n namespace. Nothing
// is offered if the controller cannot be asked.
func completeNames(cmd *cobra.Command, kind, prefix string) ([]string, cobra.ShellCompDirective) {
	c, _, err := newAPIClient(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	o := listOptions{namespace: schema.DefaultNamespace}
	if f := cmd.Flags().Lookup("namespace"); f != nil {
		o.namespace = f.Value.String()
	}
	if f := cmd.Flags().Lookup("all-namespaces"); f != nil && f.Value.String() == "true" {
		o.all = true
	}
	if kind == kindInstance || kind == kindSource {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	v, err := fetchObjects(cmd.Context(), c, kind, "", o, nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	switch kind {
	case kindNode:
		for _, n := range v.([]api.Node) {
			names = append(names, n.Name)
		}
	case kindDaemonSet:
		for _, d := range v.([]api.DaemonSet) {
			names = append(names, d.Name)
		}
	case kindConfigMap:
		for _, cm := range v.([]api.ConfigMap) {
			names = append(names, cm.Name)
		}
	case kindSecret:
		for _, s := range v.([]api.Secret) {
			names = append(names, s.Name)
		}
	}
	return withPrefix(names, prefix), cobra.ShellCompDirectiveNoFileComp
}

func withPrefix(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}
