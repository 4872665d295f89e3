package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/httpapi"
)

// newWorkflowBulkCmd starts a bulk action (docs/workflows.md, "Bulk actions"); a running
// `serve` carries it out.
func newWorkflowBulkCmd() *cobra.Command {
	var workspaceID, action, status, after, before, reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bulk WORKFLOW_ID --workspace ID|NAME --action cancel|rerun [--status S] [--created-after T] [--created-before T] [--reason R]",
		Short: "Cancel or re-run the workflow's runs a filter matches (at most 10000); a running serve carries it out",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := httpapi.BulkRequest{Action: &action, Reason: &reason}
			body.Filter = &httpapi.BulkFilterRequest{Status: &status, CreatedAfter: &after, CreatedBefore: &before}
			c, err := httpapi.ParseBulk(body)
			if err != nil {
				return err
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				c.WorkspaceID, c.WorkflowID, c.Runs = workspaceID, args[0], a.queries
				st, err := a.cmds.Bulks.StartBulk(cmd.Context(), c)
				if err != nil {
					return err
				}
				out := httpapi.BulkAccepted{BulkID: st.ID, Matched: len(st.RunIDs)}
				return printResult(cmd.OutOrStdout(), asJSON, out, fmt.Sprintf("bulk %s: %s of %d runs", out.BulkID, c.Action, out.Matched))
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().StringVar(&action, "action", "", "cancel or rerun (required)")
	cmd.Flags().StringVar(&status, "status", "", "the runs' status (default: not ended for cancel, FAILED for rerun)")
	cmd.Flags().StringVar(&after, "created-after", "", "runs created at or after this ISO 8601 time")
	cmd.Flags().StringVar(&before, "created-before", "", "runs created before this ISO 8601 time")
	cmd.Flags().StringVar(&reason, "reason", "", "a cancel's reason, recorded on each run")
	cmd.MarkFlagRequired("action")
	return cmd
}

// newWorkflowBulkStatusCmd shows a bulk's progress.
func newWorkflowBulkStatusCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bulk-status BULK_ID --workspace ID|NAME",
		Short: "Show a bulk action's progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				st, err := a.cmds.Bulks.Bulk(cmd.Context(), args[0])
				if err == nil && st.WorkspaceID != workspaceID {
					err = fmt.Errorf("bulk %s: %w", args[0], domain.ErrNotFound)
				}
				if err != nil {
					return err
				}
				d := st.Detail()
				lines := []string{fmt.Sprintf("bulk %s: %s of workflow %s, %s: %d matched, %d done, %d failed",
					d.ID, d.Action, d.WorkflowID, d.Status, d.Matched, d.Done, d.Failed)}
				for _, f := range d.Failures {
					lines = append(lines, fmt.Sprintf("  %s  %s", f.RunID, f.Error))
				}
				return printResult(cmd.OutOrStdout(), asJSON, d, lines...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}
