package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
)

func newEnrollmentCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "enrollment",
		Aliases: []string{"enrollments"},
		Short:   "Create, list and delete the one-time codes that admit devices",
		Long: `An enrollment code admits a device without a shell on the controller: the
device runs 'edgeset-agent enroll --controller URL --code CODE' and is given
its node name, its MQTT token and the broker URLs, which it writes into its
configuration. A code is bound to one node (--node), or admits --uses devices
that name themselves (within --name-prefix; never the name of a node the
controller knows). It expires (--ttl), sets --label on every node it admits,
and is stored as a hash only: the code is printed once, alone on the last line.`,
	}
	cmd.AddCommand(newEnrollmentCreateCmd(s), newEnrollmentListCmd(s), newEnrollmentDeleteCmd(s))
	return cmd
}

func newEnrollmentCreateCmd(s *streams) *cobra.Command {
	var req api.EnrollmentRequest
	var labels []string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make an enrollment code (printed alone on the last line)",
		Example: `  edgesetctl enrollment create --node gw-0042 --ttl 2h
  edgesetctl enrollment create --uses 50 --name-prefix berlin- --label site=berlin --ttl 72h
  edgeset-agent enroll --controller https://ctl.example:8080 --code "$(edgesetctl enrollment create --node gw-0042 | tail -1)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(labels) > 0 {
				req.Labels = map[string]string{}
				for _, l := range labels {
					k, v, ok := strings.Cut(l, "=")
					if !ok || k == "" {
						return usageError{fmt.Errorf("--label %q: want key=value", l)}
					}
					req.Labels[k] = v
				}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			code, err := c.CreateEnrollment(cmd.Context(), req)
			if err != nil {
				return cfg.explain(fmt.Errorf("create an enrollment code: %w", err))
			}
			what := fmt.Sprintf("up to %d devices", code.Uses)
			if code.Node != "" {
				what = "node " + code.Node
			}
			fmt.Fprintf(s.out, "enrollment code %s for %s, expires %s:\n", code.ID, what, code.ExpiresAt.Local().Format(time.RFC3339))
			fmt.Fprintln(s.out, code.Code)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Node, "node", "", "the one node name the code enrolls")
	f.StringVar(&req.NamePrefix, "name-prefix", "", "without --node: the prefix of every name the code admits")
	f.IntVar(&req.Uses, "uses", 0, "without --node: how many devices the code admits (default 1)")
	f.StringVar(&req.TTL, "ttl", "", "the code's lifetime (default 24h, at most 720h)")
	f.StringArrayVar(&labels, "label", nil, "key=value set on every node the code admits (repeatable)")
	f.StringVar(&req.Description, "description", "", "a note shown by enrollment ls")
	return cmd
}

func newEnrollmentListCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the enrollment codes (never their secrets)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			codes, err := c.ListEnrollments(cmd.Context())
			if err != nil {
				return cfg.explain(fmt.Errorf("list enrollment codes: %w", err))
			}
			return printEnrollments(s.out, codes, s.now())
		},
	}
}

func printEnrollments(w io.Writer, codes []api.EnrollmentCode, now time.Time) error {
	t := newTable(w, "ID", "FOR", "USED", "LABELS", "EXPIRES", "CREATED", "DESCRIPTION")
	for _, c := range codes {
		what := c.Node
		if what == "" {
			what = orNone(c.NamePrefix) + "*"
		}
		expires := "in " + c.ExpiresAt.Sub(now).Round(time.Minute).String()
		if !now.Before(c.ExpiresAt) {
			expires = "expired"
		}
		var labels []string
		for k, v := range c.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		t.row(c.ID, what, strconv.Itoa(len(c.Enrolled))+"/"+strconv.Itoa(c.Uses), orNone(strings.Join(labels, ",")),
			expires, age(c.CreatedAt, now), orNone(c.Description))
	}
	return t.flush()
}

func newEnrollmentDeleteCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete", "revoke"},
		Short:   "Delete enrollment codes: they admit nobody from then on",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.DeleteEnrollment(cmd.Context(), id); err != nil {
					return cfg.explain(fmt.Errorf("delete enrollment code %s: %w", id, err))
				}
				fmt.Fprintf(s.out, "enrollment code %s deleted\n", id)
			}
			return nil
		},
	}
}
