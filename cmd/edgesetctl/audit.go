package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/audit"
)

func newAuditCmd(s *streams) *cobra.Command {
	var (
		follow bool
		user   string
		since  string
		limit  int
		output string
	)
	cmd := &cobra.Command{
		Use:   "audit [--follow] [--user U] [--since D]",
		Short: "Read the audit log: every mutating call and dashboard action (admin)",
		Long: `Read the audit log, oldest first: who (user, role), what (method, path),
when, from where (remote address, X-Forwarded-For through an HA standby) and
the result (status code; "unknown" for a call the controller did not live to
answer). Each entry is written before its call may change anything, and a call
whose entry cannot be written is refused. The log keeps at most
audit-max-entries entries, none older than audit-max-age.`,
		Example: `  edgesetctl audit --since 24h
  edgesetctl audit --user ci --follow
  edgesetctl audit -o json | jq 'select(.status >= 400)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != outputJSON {
				return usageError{fmt.Errorf("unknown output format %q: want json", output)}
			}
			f := audit.Filter{User: user, Limit: limit}
			if since != "" {
				d, err := parseTTL(since)
				if err != nil {
					return usageError{fmt.Errorf("--since: %w", err)}
				}
				f.Since = time.Now().Add(-d)
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			entries, err := c.Audit(cmd.Context(), f)
			if err != nil {
				return cfg.explain(fmt.Errorf("audit: %w", err))
			}
			if err := printAudit(s.out, output, entries, true); err != nil || !follow {
				return err
			}
			f.Limit = 0
			return followAudit(cmd.Context(), s, f, entries, output, func(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
				return c.Audit(ctx, f)
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "after the list, follow new entries (polling every second) until interrupted")
	cmd.Flags().StringVar(&user, "user", "", "only the entries of this user")
	cmd.Flags().StringVar(&since, "since", "", "only the entries of the last D (1h, 7d)")
	cmd.Flags().IntVar(&limit, "limit", 0, "only the newest LIMIT entries (default: the controller's, 1000)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: one entry per line")
	return cmd
}

// followAudit polls for entries after the last one seen until ctx ends.
func followAudit(ctx context.Context, s *streams, f audit.Filter, seen []audit.Entry, output string,
	list func(context.Context, audit.Filter) ([]audit.Entry, error)) error {
	if n := len(seen); n > 0 {
		f.SinceSeq = seen[n-1].Seq
	}
	header := len(seen) == 0
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
		entries, err := list(ctx, f)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !failing {
				fmt.Fprintf(s.err, "edgesetctl: audit: %v (retrying every %s)\n", err, interval)
			}
			failing = true
			continue
		}
		failing = false
		if len(entries) == 0 {
			continue
		}
		f.SinceSeq = entries[len(entries)-1].Seq
		if err := printAudit(s.out, output, entries, header); err != nil {
			return err
		}
		header = false
	}
}

// printAudit prints entries as a table (with its header when header is
// set) or as JSON lines.
func printAudit(w io.Writer, output string, entries []audit.Entry, header bool) error {
	if output == outputJSON {
		enc := json.NewEncoder(w)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(entries) == 0 && header {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "SEQ\tTIME\tUSER\tVIA\tMETHOD\tPATH\tFROM\tRESULT\tDETAIL")
	}
	for _, e := range entries {
		from := e.Remote
		if e.ForwardedFor != "" {
			from += " for " + e.ForwardedFor
		}
		who := e.User
		if e.Role != "" {
			who += " (" + e.Role + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.UTC().Format(time.RFC3339), who, e.Via,
			e.Method, e.Path, from, e.Result(), e.Detail)
	}
	return tw.Flush()
}
