package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/config"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "switchyard",
		Short: "Switchyard: workflow execution and identity service",
		Long: "Switchyard runs automation work inside workspaces: component executions and workflow runs\n" +
			"over a signed REST API, status by polling, server-sent events and signed webhooks, billed in\n" +
			"credits, with an OpenID Connect provider for third-party apps.\n\n" + config.Usage(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newAdminCmd(), newProjectionsCmd(), newBillingCmd(), newBenchCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "switchyard", version)
			return nil
		},
	}
}
