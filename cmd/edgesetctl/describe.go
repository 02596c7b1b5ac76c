package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// describeEvents is how many recent events describe shows.
const describeEvents = 20

func newDescribeCmd(s *streams) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe (node|daemonset|configmap|secret) NAME",
		Short: "Show a node, daemonset, configmap or secret in detail, with reasons and events",
		Example: `  edgesetctl describe node gw-0042
  edgesetctl describe ds node-exporter -n monitoring
  edgesetctl describe cm agent-config -n edge        # keys, sizes, which daemonsets use it`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, _, err := resourceKind(args[0])
			if err != nil {
				return err
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			switch kind {
			case kindNode:
				err = describeNode(cmd.Context(), c, s.out, args[1], s.now())
			case kindDaemonSet:
				err = describeDaemonSet(cmd.Context(), c, s.out, namespace+"/"+args[1], s.now())
			case kindConfigMap, kindSecret:
				err = describeConfig(cmd.Context(), c, s.out, kind, namespace+"/"+args[1], s.now())
			default:
				return usageError{fmt.Errorf("describe supports nodes, daemonsets, configmaps and secrets")}
			}
			return cfg.explain(err)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", schema.DefaultNamespace, "namespace of the daemonset, configmap or secret")
	return cmd
}

func describeNode(ctx context.Context, c *api.Client, w io.Writer, name string, now time.Time) error {
	n, err := c.GetNode(ctx, name)
	if err != nil {
		return err
	}
	events, err := c.Events(ctx, api.EventFilter{Object: "node/" + name, Limit: describeEvents})
	if err != nil {
		return err
	}
	writeNode(w, n, events, now)
	return nil
}

// writeNode renders a described node, its ages measured at now.
func writeNode(w io.Writer, n api.Node, events []api.Event, now time.Time) {
	field(w, "Name", n.Name)
	presence := "offline"
	if n.Online {
		presence = "online"
	}
	field(w, "Status", fmt.Sprintf("%s (%s, last seen %s ago)", nodeStatus(n), presence, agePtr(n.LastSeen, now)))
	listField(w, "Labels", sortedPairs(n.Labels))
	var taints []string
	for _, t := range n.Taints {
		taints = append(taints, taintString(t))
	}
	listField(w, "Taints", taints)
	field(w, "Unschedulable", strconv.FormatBool(n.Unschedulable))
	field(w, "System", fmt.Sprintf("%s/%s, agent %s, %s %s", orNone(n.Info.OS), orNone(n.Info.Arch),
		orNone(n.Info.AgentVersion), orNone(n.Info.Runtime), n.Info.RuntimeVersion))
	field(w, "Generation", fmt.Sprintf("desired %d, observed %d", n.DesiredGeneration, n.ObservedGeneration))
	section(w, "Conditions")
	t := newTable(w, "  TYPE", "STATUS", "SINCE", "REASON", "MESSAGE")
	for _, c := range n.Conditions {
		t.row("  "+c.Type, c.Status, age(c.Since, now), orNone(c.Reason), orNone(c.Message))
	}
	t.flush()
	writeTelemetry(w, n.Telemetry, now)
	writeInstances(w, n.Instances, false)
	section(w, "Placement")
	t = newTable(w, "  DAEMONSET", "RUN", "KEEP RUNNING", "REASONS")
	for _, p := range n.Placement {
		t.row("  "+p.DaemonSet, yesNo(p.Run), yesNo(p.KeepRunning), orNone(strings.Join(p.Reasons, "; ")))
	}
	t.flush()
	writeEvents(w, events, now)
}

// writeTelemetry renders the node's last resource report: host figures,
// filesystems, per-instance usage, and how many reports the history holds.
func writeTelemetry(w io.Writer, tm *telemetry.Node, now time.Time) {
	if tm == nil {
		field(w, "Telemetry", "<none> (not reported by this agent)")
		return
	}
	m := tm.Latest
	temp := "<none>"
	if m.TemperatureCelsius != nil {
		temp = fmt.Sprintf("%.1f°C", *m.TemperatureCelsius)
	}
	field(w, "Telemetry", fmt.Sprintf("received %s ago, %d in history", age(tm.Received, now), len(tm.History)))
	field(w, "  Load", fmt.Sprintf("%.2f (%d CPUs), uptime %s", m.Load1, m.CPUs, time.Duration(m.UptimeSeconds)*time.Second))
	field(w, "  Memory", fmt.Sprintf("%s available of %s", telemetry.Bytes(m.MemoryAvailableBytes), telemetry.Bytes(m.MemoryTotalBytes)))
	for _, d := range m.Disks {
		field(w, "  Disk "+d.Name, fmt.Sprintf("%s free of %s (%s)", telemetry.Bytes(d.FreeBytes), telemetry.Bytes(d.SizeBytes), d.Path))
	}
	field(w, "  Temperature", temp)
	if len(m.Instances) > 0 {
		t := newTable(w, "  DAEMONSET", "CPU", "MEMORY")
		for _, in := range m.Instances {
			t.row("  "+in.DaemonSet, fmt.Sprintf("%.1f%%", in.CPUPercent), telemetry.Bytes(in.MemoryBytes))
		}
		t.flush()
	}
}

func taintString(t schema.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

func describeDaemonSet(ctx context.Context, c *api.Client, w io.Writer, key string, now time.Time) error {
	d, err := c.GetDaemonSet(ctx, key)
	if err != nil {
		return err
	}
	events, err := c.Events(ctx, api.EventFilter{Object: "daemonset/" + key, Limit: describeEvents})
	if err != nil {
		return err
	}
	writeDaemonSet(w, d, events, now)
	return nil
}

// writeDaemonSet renders a described daemonset, its events aged at now.
func writeDaemonSet(w io.Writer, d api.DaemonSet, events []api.Event, now time.Time) {
	spec := d.Manifest.Spec
	field(w, "Name", d.Name)
	field(w, "Namespace", d.Namespace)
	field(w, "API version", d.Manifest.APIVersion)
	listField(w, "Labels", sortedPairs(d.Manifest.Metadata.Labels))
	field(w, "Node-Selector", mapString(spec.Template.Spec.NodeSelector))
	field(w, "Strategy", strategyString(spec))
	writeSchedule(w, spec.Rollout)
	if lock := updateLockField(spec); lock != "" {
		field(w, "Update lock", lock)
	}
	field(w, "Min ready", fmt.Sprintf("%ds", spec.MinReadySeconds))
	field(w, "Revision", fmt.Sprintf("%d (%s), generation %d", d.CurrentRevision, d.CurrentHash, d.Generation))
	listField(w, "Uses", configUses(spec.Template.References()))
	section(w, "Containers")
	for _, c := range spec.Template.Spec.Containers {
		fmt.Fprintf(w, "  %s: %s\n", c.Name, c.Image)
	}
	st := d.Status
	field(w, "Nodes", fmt.Sprintf("%d desired, %d current, %d ready, %d up-to-date, %d available, %d misscheduled, %d offline",
		st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady, st.UpdatedNumberScheduled,
		st.NumberAvailable, st.NumberMisscheduled, st.NodesOffline))
	if r := st.Rollout; r != nil {
		field(w, "Rollout", rolloutSummary(*r, d.Instances)+heldNote(d))
	}
	writeInstances(w, d.Instances, true)
	writeEvents(w, events, now)
}

// writeSchedule renders the per-site budget and the maintenance windows,
// when the daemonset has them.
func writeSchedule(w io.Writer, r *schema.RolloutPolicy) {
	if r == nil {
		return
	}
	if b := r.MaxUnavailablePerTopology; b != nil && b.MaxUnavailable != nil {
		field(w, "Site budget", fmt.Sprintf("maxUnavailable %s per %s", b.MaxUnavailable, b.TopologyKey))
	}
	if p := r.Prefetch; p.On() {
		field(w, "Prefetch", prefetchPolicyString(p))
	}
	if len(r.MaintenanceWindows) == 0 {
		return
	}
	var windows []string
	for _, mw := range r.MaintenanceWindows {
		s := fmt.Sprintf("%q for %s (%s)", mw.Schedule, mw.Duration, cmp.Or(mw.TimeZone, "UTC"))
		if len(mw.NodeSelector) > 0 {
			s += " on " + mapString(mw.NodeSelector)
		} else {
			s += " on every node"
		}
		windows = append(windows, s)
	}
	listField(w, "Windows", windows)
}

func strategyString(spec schema.DaemonSetSpec) string {
	u := spec.UpdateStrategy
	if u.Type == schema.OnDeleteStrategy {
		return schema.OnDeleteStrategy
	}
	s := schema.RollingUpdateStrategy
	if ru := u.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			s += " maxUnavailable " + ru.MaxUnavailable.String()
		}
		if ru.MaxSurge != nil {
			s += " maxSurge " + ru.MaxSurge.String()
		}
	}
	return s
}

// windowNote says how many nodes wait for a maintenance window and when
// the next one opens; empty when none waits.
func windowNote(r api.RolloutStatus) string {
	if r.WaitingForWindow == 0 {
		return ""
	}
	s := fmt.Sprintf("; %d waiting for a maintenance window", r.WaitingForWindow)
	if r.NextWindow != nil {
		return s + ", next opens " + r.NextWindow.UTC().Format(time.RFC3339)
	}
	return s + ", no window selects them or opens again"
}

func rolloutSummary(r api.RolloutStatus, ins []api.Instance) string {
	s := fmt.Sprintf("%d/%d updated, %d updating, %d waiting, %d offline, %d failed", r.Updated, r.Total, r.Updating, r.Waiting, r.Offline, r.Failed)
	s += windowNote(r) + prefetchNote(r, ins)
	switch {
	case r.RolledBack:
		s += "; rolled back from " + shortHash(r.RolledBackFrom)
		if r.RollbackReason != "" {
			s += " (" + r.RollbackReason + ")"
		}
	case r.Paused:
		s += "; paused"
	case r.CanaryWaiting:
		s += "; canary waiting for promotion"
	case r.Complete:
		s += "; complete"
	}
	if r.PauseReason != "" {
		s += ": " + r.PauseReason
	}
	return s
}

func writeInstances(w io.Writer, ins []api.Instance, byNode bool) {
	section(w, "Instances")
	first := "  DAEMONSET"
	if byNode {
		first = "  NODE"
	}
	t := newTable(w, first, "REVISION", "PHASE", "READY", "RESTARTS", "MESSAGE")
	for _, in := range ins {
		who := in.DaemonSet
		if byNode {
			who = in.Node
		}
		msg := instanceMessage(in)
		if pf := instancePrefetch(in.Prefetch); pf != "" {
			msg = strings.TrimPrefix(msg+"; "+pf, "; ")
		}
		t.row("  "+who, shortHash(in.Revision), in.Phase, yesNo(in.Ready), strconv.Itoa(int(in.Restarts)), orNone(msg))
	}
	t.flush()
}

// writeEvents renders a described object's events, aged at now.
func writeEvents(w io.Writer, events []api.Event, now time.Time) {
	section(w, "Events")
	if len(events) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	t := newTable(w, "  AGE", "TYPE", "REASON", "MESSAGE")
	for _, e := range events {
		t.row("  "+eventAge(e, now), e.Type, e.Reason, e.Message)
	}
	t.flush()
}

func field(w io.Writer, name, value string) { fmt.Fprintf(w, "%-15s%s\n", name+":", value) }

func section(w io.Writer, name string) { fmt.Fprintf(w, "%s:\n", name) }

// listField prints one value per line, aligned under the first.
func listField(w io.Writer, name string, values []string) {
	if len(values) == 0 {
		field(w, name, "<none>")
		return
	}
	field(w, name, values[0])
	for _, v := range values[1:] {
		fmt.Fprintf(w, "%-15s%s\n", "", v)
	}
}

func sortedPairs(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	return strings.Split(mapString(m), ",")
}
