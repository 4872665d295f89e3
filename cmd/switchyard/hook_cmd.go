package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
)

func newWorkflowHookCmd() *cobra.Command {
	h := &cobra.Command{Use: "hook", Short: "Manage the inbound webhooks of ON_WEBHOOK components (docs/workflows.md, Inbound webhooks)"}
	h.AddCommand(newHookRotateCmd())
	return h
}

// newHookRotateCmd gives a hook a new token and secret, as the workspace endpoint's rotate does:
// they are printed this once, and the old URL stops working at once.
func newHookRotateCmd() *cobra.Command {
	var workspaceID, secret string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rotate WORKFLOW_ID COMPONENT_ID --workspace ID|NAME [--secret S]",
		Short: "Give an ON_WEBHOOK component's hook a new URL and secret, shown once; the old URL stops working now",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				issued, err := a.cmds.Hooks.RotateHook(cliContext(cmd), commands.RotateHook{WorkspaceID: workspaceID, WorkflowID: args[0],
					ComponentID: args[1], Secret: secret})
				if err != nil {
					return flagError(err, "secret")
				}
				return printResult(cmd.OutOrStdout(), asJSON, issued,
					fmt.Sprintf("hook %s of workflow %s: %s%s secret %s (shown once; the old URL no longer works)",
						issued.ComponentID, args[0], a.cfg.BaseURL, issued.URL, issued.Secret))
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().StringVar(&secret, "secret", "", "the new signing secret when the sender draws it (a Standard Webhooks sender's whsec_...); default: a new one is drawn")
	return cmd
}
