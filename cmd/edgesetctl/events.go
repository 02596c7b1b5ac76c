package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	output    string
	limit     int
	watch     bool
}

func newEventsCmd(s *streams) *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events [--for node/NAME|daemonset/NS/NAME|configmap/NS/NAME|secret/NS/NAME] [--watch]",
		Short: "List the controller's events, oldest first, and optionally follow new ones",
		Example: `  edgesetctl events
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
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			f := api.EventFilter{Object: object, Limit: o.limit}
			return cfg.explain(showEvents(cmd.Context(), c, s, f, o))
		},
	}
	cmd.Flags().StringVar(&o.forObject, "for", "", "only the events of node/NAME, daemonset/NS/NAME, configmap/NS/NAME or secret/NS/NAME (without NS, -n)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", schema.DefaultNamespace, "namespace of a --for daemonset, configmap or secret given without one")
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
	if !o.watch {
		if o.output == outputJSON {
			return printData(s.out, outputJSON, events)
		}
		return printEvents(s.out, events, true)
	}
	if err := printEventStream(s.out, o.output, events, true); err != nil {
		return err
	}
	f.Limit = 0
	f.SinceSeq = lastSeq(events, f.SinceSeq)
	return watchEvents(ctx, c, s, f, o.output, len(events) == 0)
}

// watchEvents polls for events after f.SinceSeq every watchInterval until
// ctx ends, printing each new batch. A failed poll is reported once per
// outage and polling goes on.
func watchEvents(ctx context.Context, c *api.Client, s *streams, f api.EventFilter, format string, header bool) error {
	t := time.NewTicker(watchInterval)
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
				fmt.Fprintf(s.err, "edgesetctl: events: %v (retrying every %s)\n", err, watchInterval)
			}
			failing = true
			continue
		}
		failing = false
		if len(events) == 0 {
			continue
		}
		if err := printEventStream(s.out, format, events, header); err != nil {
			return err
		}
		header = false
		f.SinceSeq = lastSeq(events, f.SinceSeq)
	}
}

// printEventStream prints a batch of followed events: table rows (with the
// header only if header), or one JSON object per line.
func printEventStream(w io.Writer, format string, events []api.Event, header bool) error {
	if format != outputJSON {
		if len(events) == 0 && !header {
			return nil
		}
		return printEvents(w, events, header)
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

// printEvents prints events as a table: AGE TYPE REASON OBJECT MESSAGE.
func printEvents(w io.Writer, events []api.Event, header bool) error {
	if len(events) == 0 && header {
		_, err := fmt.Fprintln(w, "No events.")
		return err
	}
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)}
	if header {
		t.row("AGE", "TYPE", "REASON", "OBJECT", "MESSAGE")
	}
	for _, e := range events {
		t.row(age(e.Time), e.Type, e.Reason, e.Object, e.Message)
	}
	return t.flush()
}
