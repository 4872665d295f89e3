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
			"credits, with an OpenID Connect provider for third-party apps.\n\n" +
			"The environment variables it reads are listed after the commands (docs/configuration.md).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newAdminCmd(), newProjectionsCmd(), newBillingCmd(), newBenchCmd(), newBenchWorkerCmd(), newVersionCmd())
	// The variables run to a hundred lines: after the commands, which are what a reader of
	// --help looks for first, and only in the root's help (each command's is about the command).
	commandHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		commandHelp(cmd, args)
		if cmd == root {
			fmt.Fprint(cmd.OutOrStdout(), "\n"+config.Usage())
		}
	})
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
