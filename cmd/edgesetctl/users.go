package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/api"
)

func newUserCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, list and revoke API users (admin)",
		Long: `API users authenticate with a bearer token and act with a role:

  ` + access.Describe(access.RoleViewer) + `
  ` + access.Describe(access.RoleOperator) + `
  admin: everything (users, node tokens, keys, secret values, node deletion, exec, backups, the audit log)

A user created with --namespace NS acts only on objects of NS (as a Kubernetes
Role binds): it cannot reach nodes, node tokens, users, the audit log or lists
across namespaces. The controller stores only each token's SHA-256; the token
is shown once, by user create. User "admin" holds the data directory's
admin.token and cannot be revoked (replace the file and restart instead).
See docs/security.md.`,
	}
	cmd.AddCommand(newUserCreateCmd(s), newUserListCmd(s), newUserRevokeCmd(s), newWhoAmICmd(s))
	return cmd
}

func newUserCreateCmd(s *streams) *cobra.Command {
	var role, namespace, ttl string
	cmd := &cobra.Command{
		Use:   "create NAME --role viewer|operator|admin [--namespace NS] [--ttl D]",
		Short: "Create a user and print its API token (alone on the last line)",
		Example: `  edgesetctl user create ci --role operator --namespace monitoring --ttl 30d
  export EDGESET_TOKEN="$(edgesetctl user create alice --role viewer | tail -1)"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if role == "" {
				return usageError{fmt.Errorf("--role: required (viewer, operator or admin)")}
			}
			d, err := parseTTL(ttl)
			if err != nil {
				return usageError{err}
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			req := api.CreateUserRequest{Name: args[0], Role: role, Namespace: namespace}
			if d > 0 {
				req.TTL = d.String()
			}
			out, err := c.CreateUser(cmd.Context(), req)
			if err != nil {
				return cfg.explain(fmt.Errorf("create user %s: %w", args[0], err))
			}
			fmt.Fprintf(s.out, "user %s created (%s), expires %s; its API token, shown only now:\n",
				out.User.Name, scopeOf(out.User), expiry(out.User.ExpiresAt))
			fmt.Fprintln(s.out, out.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "viewer, operator or admin")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "scope the user to this namespace (default: every namespace and the cluster)")
	cmd.Flags().StringVar(&ttl, "ttl", "", "token lifetime: a Go duration (720h) or days (30d); default none, within the controller's user-max-ttl")
	return cmd
}

// parseTTL reads a duration, with "d" for days besides Go's units.
func parseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("--ttl %q: want a positive number of days (30d) or a Go duration (720h)", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--ttl %q: want a positive Go duration (720h) or days (30d)", s)
	}
	return d, nil
}

func scopeOf(u api.UserInfo) string {
	if u.Namespace != "" {
		return u.Role + " in namespace " + u.Namespace
	}
	return u.Role
}

func expiry(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

func newUserListCmd(s *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the users (never their tokens)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			users, err := c.ListUsers(cmd.Context())
			if err != nil {
				return cfg.explain(fmt.Errorf("list users: %w", err))
			}
			if output != "" {
				return printData(s.out, output, users)
			}
			tw := tabwriter.NewWriter(s.out, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tNAMESPACE\tCREATED\tEXPIRES\tCREATED BY")
			for _, u := range users {
				ns := u.Namespace
				if ns == "" {
					ns = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Name, u.Role, ns, u.CreatedAt.UTC().Format(time.RFC3339),
					expiry(u.ExpiresAt), dash(u.CreatedBy))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newUserRevokeCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Delete a user: its token stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			if err := c.RevokeUser(cmd.Context(), args[0]); err != nil {
				return cfg.explain(fmt.Errorf("revoke user %s: %w", args[0], err))
			}
			fmt.Fprintf(s.out, "user %s revoked\n", args[0])
			return nil
		},
	}
}

func newWhoAmICmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Print the user the token belongs to and its permissions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			u, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return cfg.explain(fmt.Errorf("whoami: %w", err))
			}
			fmt.Fprintf(s.out, "user %s (%s), expires %s\npermissions: %s\n", u.Name, scopeOf(u), expiry(u.ExpiresAt), strings.Join(u.Permissions, ", "))
			return nil
		},
	}
}
