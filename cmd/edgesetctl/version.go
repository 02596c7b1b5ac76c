package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/schema"
)

func newVersionCmd(s *streams) *cobra.Command {
	var clientOnly bool
	return &cobra.Command{
		Use:   "version",
		Short: "Print the client and controller versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(s.out, "Client:     %s\n", schema.Version)
			if clientOnly {
				return nil
			}
			c, cfg, err := newAPIClient(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), 5*time.Second, "the controller's version at "+cfg.Server)
			defer cancel()
			v, err := c.Version(ctx)
			if err != nil {
				return cfg.explain(err)
			}
			fmt.Fprintf(s.out, "Controller: %s (%s, broker %s)\n", v.Version, cfg.Server, v.Broker)
			return nil
		},
	}
}
