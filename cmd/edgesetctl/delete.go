package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// deleteOptions are delete's flags.
type deleteOptions struct {
	paths          []string
	namespace      string
	node           string
	orphan         bool
	ignoreNotFound bool
	dryRun         dryRunValue
}

func newDeleteCmd(s *streams) *cobra.Command {
	var o deleteOptions
	cmd := &cobra.Command{
		Use:   "delete (-f FILE|DIR|- | (daemonset|configmap|secret|node|instance) NAME... | KIND/NAME...)",
		Short: "Delete daemonsets, configmaps or secrets (by name or from manifests), or forget a node",
		Long: `Deleting a daemonset removes its instances from every node; nodes that are
offline remove them when they return. With --cascade=orphan the instances
keep running, unmanaged.

delete -f FILE|DIR|- deletes the daemonsets, configmaps and secrets the
manifests name (a directory is read recursively, as by apply). As with
kubectl, every object is tried: the ones that do not exist are reported and
make the command fail, unless --ignore-not-found.

Deleting a node clears its desired state, so its agent (if reachable) stops
every edgeset daemon, then forgets the node and its overrides. An agent that
announces itself again comes back as a new node.

Deleting an instance (instance DAEMONSET --node NODE) removes one node's
instance of a daemonset: under OnDelete the node then moves to the current
revision, as deleting a pod does in Kubernetes.

Deleting a configmap or secret that daemonsets reference is allowed, as in
Kubernetes: their instances wait in CreateContainerConfigError until it is
applied again, unless the reference is optional.

--dry-run=client|server deletes nothing and says what would be deleted:
both check that each object exists on the controller (a deletion has no
other check to run).`,
		Example: `  edgesetctl delete daemonset fluentd -n logging
  edgesetctl delete -f configs/examples/ --ignore-not-found
  edgesetctl delete ds/fluentd cm/agent-config -n edge --dry-run=server
  edgesetctl delete node gw-0042
  edgesetctl delete instance fluentd --node gw-0042 -n logging`,
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := deleteTargets(s, o, args)
			if err != nil {
				return err
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			return cfg.explain(deleteAll(cmd.Context(), s, c, refs, o))
		},
	}
	cmd.Flags().StringArrayVarP(&o.paths, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable): delete the objects it names")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset, configmap or secret")
	cmd.Flags().StringVar(&o.node, "node", "", "node of the instance to delete (delete instance)")
	cmd.Flags().Var(newCascadeValue(&o.orphan), "cascade", "background (remove instances) or orphan (leave them running)")
	cmd.Flags().BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "treat an object that does not exist as deleted")
	addDryRunFlag(cmd.Flags(), &o.dryRun)
	return cmd
}

// objectRef names one object delete acts on. kind is the CLI's
// (kindDaemonSet, kindConfigMap, kindSecret, kindNode, kindInstance); key
// is namespace/name, a node's name, or for an instance its daemonset's key
// with node set.
type objectRef struct {
	kind, key, node string
}

// refOf names a decoded manifest object.
func refOf(o schema.Object) objectRef {
	switch {
	case o.ConfigMap != nil:
		return objectRef{kind: kindConfigMap, key: o.ConfigMap.Key()}
	case o.Secret != nil:
		return objectRef{kind: kindSecret, key: o.Secret.Key()}
	}
	return objectRef{kind: kindDaemonSet, key: o.DaemonSet.Key()}
}

func (r objectRef) String() string {
	if r.kind == kindInstance {
		return "instance of daemonset/" + r.key + " on node " + r.node
	}
	return r.kind + "/" + r.key
}

// get fails (api.ErrNotFound) when the object does not exist.
func (r objectRef) get(ctx context.Context, c *api.Client) error {
	var err error
	switch r.kind {
	case kindConfigMap:
		_, err = c.GetConfigMap(ctx, r.key)
	case kindSecret:
		_, err = c.GetSecret(ctx, r.key, false)
	case kindNode:
		_, err = c.GetNode(ctx, r.key)
	case kindInstance:
		var ds api.DaemonSet
		if ds, err = c.GetDaemonSet(ctx, r.key); err == nil && !slices.ContainsFunc(ds.Instances, func(in api.Instance) bool { return in.Node == r.node }) {
			err = fmt.Errorf("%w: daemonset %s has no instance on node %s", api.ErrNotFound, r.key, r.node)
		}
	default:
		_, err = c.GetDaemonSet(ctx, r.key)
	}
	return err
}

func (r objectRef) delete(ctx context.Context, c *api.Client, orphan bool) error {
	switch r.kind {
	case kindConfigMap:
		return c.DeleteConfigMap(ctx, r.key)
	case kindSecret:
		return c.DeleteSecret(ctx, r.key)
	case kindNode:
		return c.DeleteNode(ctx, r.key)
	case kindInstance:
		return c.DeleteInstance(ctx, r.key, r.node)
	}
	return c.DeleteDaemonSet(ctx, r.key, orphan)
}

// deleteTargets turns -f paths or KIND NAME... / KIND/NAME... arguments
// into the objects to delete.
func deleteTargets(s *streams, o deleteOptions, args []string) ([]objectRef, error) {
	if len(o.paths) > 0 {
		if len(args) > 0 {
			return nil, usageError{errors.New("delete: give -f FILE or KIND NAME, not both")}
		}
		srcs, err := readManifests(s, o.paths, false)
		if err != nil {
			return nil, err
		}
		var refs []objectRef
		for _, src := range srcs {
			objs, _, err := schema.Decode(src.name, src.data)
			if err != nil {
				return nil, err
			}
			for _, obj := range objs {
				refs = append(refs, refOf(obj))
			}
		}
		return refs, nil
	}
	if len(args) == 0 {
		return nil, usageError{errors.New("delete: want -f FILE|DIR|-, KIND NAME [NAME...] or KIND/NAME [KIND/NAME...]")}
	}
	var refs []objectRef
	if _, name, _ := strings.Cut(args[0], "/"); name != "" {
		for _, a := range args {
			kind, name, err := resourceKind(a)
			if err != nil {
				return nil, err
			}
			if name == "" {
				return nil, usageError{fmt.Errorf("delete: %q: want KIND/NAME", a)}
			}
			refs = append(refs, o.ref(kind, name))
		}
	} else {
		kind, _, err := resourceKind(args[0])
		if err != nil {
			return nil, err
		}
		if len(args) < 2 {
			return nil, usageError{fmt.Errorf("delete %s: want at least one NAME", args[0])}
		}
		for _, name := range args[1:] {
			refs = append(refs, o.ref(kind, name))
		}
	}
	for _, r := range refs {
		switch {
		case r.kind == kindInstance && o.node == "":
			return nil, usageError{errors.New("delete instance needs --node NODE")}
		case r.kind != kindDaemonSet && r.kind != kindConfigMap && r.kind != kindSecret && r.kind != kindNode && r.kind != kindInstance:
			return nil, usageError{fmt.Errorf("delete: %ss cannot be deleted", r.kind)}
		}
	}
	return refs, nil
}

// ref names the object of kind called name, in o's namespace.
func (o deleteOptions) ref(kind, name string) objectRef {
	switch kind {
	case kindNode:
		return objectRef{kind: kind, key: name}
	case kindInstance:
		return objectRef{kind: kind, key: o.namespace + "/" + name, node: o.node}
	}
	return objectRef{kind: kind, key: o.namespace + "/" + name}
}

// deleteAll deletes (or, in a dry run, checks) every ref, as kubectl does:
// each is tried; what failed is reported on stderr and fails the command.
func deleteAll(ctx context.Context, s *streams, c *api.Client, refs []objectRef, o deleteOptions) error {
	failed := 0
	for _, r := range refs {
		var err error
		if o.dryRun.active() {
			err = r.get(ctx, c)
		} else {
			err = r.delete(ctx, c, o.orphan)
		}
		switch {
		case err == nil:
			fmt.Fprintf(s.out, "%s deleted%s\n", r, o.dryRun.suffix())
		case errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrNotController):
			if o.ignoreNotFound {
				continue
			}
			fmt.Fprintf(s.err, "Error from server (NotFound): %s not found\n", r)
			failed++
		case len(refs) == 1:
			return err
		default:
			fmt.Fprintf(s.err, "%s: %v\n", r, err)
			failed++
		}
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

// cascadeValue parses --cascade=background|orphan.
type cascadeValue struct{ orphan *bool }

func newCascadeValue(orphan *bool) *cascadeValue { return &cascadeValue{orphan} }

func (v *cascadeValue) String() string {
	if v.orphan != nil && *v.orphan {
		return "orphan"
	}
	return "background"
}

func (v *cascadeValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "background", "foreground", "true":
		*v.orphan = false
	case "orphan", "false":
		*v.orphan = true
	default:
		return fmt.Errorf("%q: want background or orphan", s)
	}
	return nil
}

func (v *cascadeValue) Type() string { return "string" }
