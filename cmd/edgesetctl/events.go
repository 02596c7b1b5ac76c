package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// eventsOptions are the flags of the events command.
type eventsOptions struct {
	forObject string
	namespace string
	// inNamespace, set by an explicit -n without --for, keeps only the
	// events of that namespace's objects; all (-A) keeps every event.
	inNamespace string
	all         bool
	output      string
	limit       int
	watch       bool
}

func newEventsCmd(s *streams) *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events [--for node/NAME|daemonset/NS/NAME|configmap/NS/NAME|secret/NS/NAME] [--watch]",
		Short: "List the controller's events, oldest first, and optionally follow new ones",
		Long: `List the controller's events, oldest first, and optionally follow new ones.

Without -n, -A or --for every event is listed: nodes' and every namespace's.
-n NS keeps the events of the daemonsets, configmaps and secrets of NS (nodes
belong to no namespace); -A lists every event. With --for, -n is the
namespace of the object named without one.`,
		Example: `  edgesetctl events
  edgesetctl events -n monitoring
  edgesetctl events --for node/gw-1
  edgesetctl events --for ds/node-exporter -n monitoring --watch
  edgesetctl events --for cm/fluent-bit -n logging`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "" && o.output != outputJSON {
				return usageError{fmt.Errorf("unknown output format %q: want json", o.output)}
			}
			object, err := eventObject(o.forObject, o.namespace)
			if err != nil {
				return err
			}
			if object == "" && !o.all && cmd.Flags().Changed("namespace") {
				o.inNamespace = o.namespace
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			f := api.EventFilter{Object: object, Limit: o.limit}
			if o.inNamespace != "" {
				f.Limit = 0 // the namespace is filtered here, then limited
			}
			return cfg.explain(showEvents(cmd.Context(), c, s, f, o))
		},
	}
	cmd.Flags().StringVar(&o.forObject, "for", "", "only the events of node/NAME, daemonset/NS/NAME, configmap/NS/NAME or secret/NS/NAME (without NS, -n)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", schema.DefaultNamespace, "only the events of this namespace's objects; with --for, the namespace of an object given without one")
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "the events of every namespace and of nodes (the default without -n)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json: an array, or with --watch one event per line")
	cmd.Flags().IntVar(&o.limit, "limit", 0, "only the newest LIMIT events (default: the controller's)")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after the list, follow new events (polling every second) until interrupted")
	return cmd
}

// eventObject turns --for into the API's object name: "node/NAME" or
// "daemonset/NS/NAME"; kind aliases (no, ds) are accepted and a daemonset
// without a namespace gets ns.
func eventObject(arg, ns string) (string, error) {
	if arg == "" {
		return "", nil
	}
	kind, name, err := resourceKind(arg)
	if err != nil {
		return "", err
	}
	switch {
	case name == "":
		return "", usageError{fmt.Errorf("--for %q: want node/NAME, daemonset/NS/NAME, configmap/NS/NAME or secret/NS/NAME", arg)}
	case kind == kindNode:
		return "node/" + name, nil
	case kind == kindDaemonSet || kind == kindConfigMap || kind == kindSecret:
		if !strings.Contains(name, "/") {
			name = ns + "/" + name
		}
		return kind + "/" + name, nil
	}
	return "", usageError{fmt.Errorf("--for %q: events are kept for nodes, daemonsets, configmaps and secrets", arg)}
}

// showEvents prints the events f selects, then with o.watch follows new
// ones by sequence number until ctx ends.
func showEvents(ctx context.Context, c *api.Client, s *streams, f api.EventFilter, o eventsOptions) error {
	events, err := c.Events(ctx, f)
	if err != nil {
		return err
	}
	seq := lastSeq(events, f.SinceSeq)
	events = eventsIn(events, o.inNamespace, o.limit)
	if !o.watch {
		if o.output == outputJSON {
			return printData(s.out, outputJSON, events)
		}
		if len(events) == 0 {
			return noEvents(s.err, o)
		}
		return printEvents(s.out, events, true, s.now())
	}
	if err := printEventStream(s.out, o.output, events, true, s.now()); err != nil {
		return err
	}
	f.Limit = 0
	f.SinceSeq = seq
	return watchEvents(ctx, c, s, f, o, len(events) == 0)
}

// eventsIn keeps the events of objects in namespace ns (all of them when
// ns is empty), the newest limit of them when limit > 0.
func eventsIn(events []api.Event, ns string, limit int) []api.Event {
	if ns != "" {
		events = slices.DeleteFunc(events, func(e api.Event) bool { return eventNamespace(e.Object) != ns })
	}
	if limit > 0 && len(events) > limit {
		events = events[len(events)-limit:]
	}
	return events
}

// eventNamespace is the namespace of an event's object
// ("daemonset/NS/NAME"), or "" for a node's.
func eventNamespace(object string) string {
	kind, rest, _ := strings.Cut(object, "/")
	if kind == kindNode {
		return ""
	}
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

// noEvents says that nothing matched, as kubectl events does, on w.
func noEvents(w io.Writer, o eventsOptions) error {
	if o.inNamespace != "" {
		_, err := fmt.Fprintf(w, "No events found in %s namespace.\n", o.inNamespace)
		return err
	}
	_, err := fmt.Fprintln(w, "No events found.")
	return err
}

// watchEvents polls for events after f.SinceSeq every s.watchInterval()
// until ctx ends, printing each new batch, aged at the time it is printed.
// A failed poll is reported once per outage and polling goes on.
func watchEvents(ctx context.Context, c *api.Client, s *streams, f api.EventFilter, o eventsOptions, header bool) error {
	interval := s.watchInterval()
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		events, err := c.Events(ctx, f)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !failing {
				fmt.Fprintf(s.err, "edgesetctl: events: %v (retrying every %s)\n", err, interval)
			}
			failing = true
			continue
		}
		failing = false
		f.SinceSeq = lastSeq(events, f.SinceSeq)
		if events = eventsIn(events, o.inNamespace, 0); len(events) == 0 {
			continue
		}
		if err := printEventStream(s.out, o.output, events, header, s.now()); err != nil {
			return err
		}
		header = false
	}
}

// printEventStream prints a batch of followed events: table rows (with the
// header only if header) aged at now, or one JSON object per line.
func printEventStream(w io.Writer, format string, events []api.Event, header bool, now time.Time) error {
	if format != outputJSON {
		if len(events) == 0 && !header {
			return nil
		}
		return printEvents(w, events, header, now)
	}
	enc := json.NewEncoder(w)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

// lastSeq is the highest sequence number of events, or since if none is
// higher.
func lastSeq(events []api.Event, since uint64) uint64 {
	for _, e := range events {
		since = max(since, e.Seq)
	}
	return since
}

// eventAge is how long before now an event last happened and, for a series
// of repeats, kubectl's "(xN over D)": the count and the time since the
// first.
func eventAge(e api.Event, now time.Time) string {
	if e.Count <= 1 || e.LastTime == nil {
		return age(e.Time, now)
	}
	return fmt.Sprintf("%s (x%d over %s)", age(*e.LastTime, now), e.Count, age(e.Time, now))
}

// printEvents prints events as a table, aged at now: AGE TYPE REASON OBJECT
// MESSAGE.
func printEvents(w io.Writer, events []api.Event, header bool, now time.Time) error {
	if len(events) == 0 && header {
		_, err := fmt.Fprintln(w, "No events.")
		return err
	}
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)}
	if header {
		t.row("AGE", "TYPE", "REASON", "OBJECT", "MESSAGE")
	}
	for _, e := range events {
		t.row(eventAge(e, now), e.Type, e.Reason, e.Object, e.Message)
	}
	return t.flush()
}
