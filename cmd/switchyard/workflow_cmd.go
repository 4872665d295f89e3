package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/projections"
)

func newWorkflowCmd() *cobra.Command {
	w := &cobra.Command{Use: "workflow", Short: "Manage workflows (docs/workflows.md)"}
	w.AddCommand(newWorkflowCreateCmd(), newWorkflowUpdateCmd(), newWorkflowGetCmd(), newWorkflowListCmd(), newWorkflowDeleteCmd(),
		newWorkflowBulkCmd(), newWorkflowBulkStatusCmd(), newWorkflowSchedulesCmd(), newWorkflowScheduleCmd(), newWorkflowSignalCmd(),
		newWorkflowHookCmd())
	return w
}

// readFileFlag reads --file's file, or standard input for "-", up to limit bytes.
func readFileFlag(cmd *cobra.Command, path string, limit int64) ([]byte, error) {
	var r io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	return body, nil
}

// readDefinitionFile reads a definition from a file, or standard input for "-".
func readDefinitionFile(cmd *cobra.Command, path string) (workflow.Definition, error) {
	body, err := readFileFlag(cmd, path, 4<<20)
	if err != nil {
		return workflow.Definition{}, err
	}
	d, err := httpapi.DecodeDefinition(body)
	if err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func workflowLines(v workflow.View) []string {
	lines := []string{fmt.Sprintf("workflow %s %q (version %d) in workspace %s", v.ID, v.Name, v.Version, v.WorkspaceID)}
	for _, c := range v.Components {
		lines = append(lines, fmt.Sprintf("  component %-24s %-16s %s", c.ID, c.Module, c.Name))
	}
	for _, e := range v.Edges {
		lines = append(lines, fmt.Sprintf("  edge      %s -> %s", e.From, e.To))
	}
	return lines
}

func newWorkflowCreateCmd() *cobra.Command {
	var workspaceID, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --workspace ID|NAME --file def.json",
		Short: "Create a workflow from a JSON definition; prints it with its component ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := readDefinitionFile(cmd, file)
			if err != nil {
				return err
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				st, err := a.cmds.Workflows.CreateWorkflow(cmd.Context(), commands.CreateWorkflow{WorkspaceID: workspaceID, Definition: d})
				if err != nil {
					return err
				}
				return printSaved(cmd, a, asJSON, st)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().StringVar(&file, "file", "", "the definition (JSON, docs/workflows.md); - reads standard input (required)")
	cmd.MarkFlagRequired("file")
	return cmd
}

// savedOutput is a saved workflow with the hooks the save issued, whose tokens and secrets
// are shown this once (docs/workflows.md, Inbound webhooks).
type savedOutput struct {
	workflow.View
	Hooks []commands.IssuedHook `json:"hooks,omitempty"`
}

// printSaved prints a saved workflow after issuing the hooks of its new ON_WEBHOOK components,
// as the workspace endpoints do.
func printSaved(cmd *cobra.Command, a *app, asJSON bool, st workflow.State) error {
	issued, err := a.cmds.Hooks.IssueHooks(cmd.Context(), st.WorkspaceID, st.ID)
	if err != nil {
		return fmt.Errorf("workflow %s saved, its hooks not issued (rotate them to issue): %w", st.ID, err)
	}
	lines := workflowLines(st.View())
	for _, h := range issued {
		lines = append(lines, fmt.Sprintf("  hook      %s %s secret %s (shown once)", h.ComponentID, h.URL, h.Secret))
	}
	return printResult(cmd.OutOrStdout(), asJSON, savedOutput{View: st.View(), Hooks: issued}, lines...)
}

func workflowFlags(cmd *cobra.Command, workspaceID *string, asJSON *bool) {
	cmd.Flags().StringVar(workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().BoolVar(asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
}

func newWorkflowUpdateCmd() *cobra.Command {
	var workspaceID, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "update WORKFLOW_ID --workspace ID|NAME --file def.json",
		Short: "Replace a workflow's definition (runs already started keep theirs)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := readDefinitionFile(cmd, file)
			if err != nil {
				return err
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				st, err := a.cmds.Workflows.UpdateWorkflow(cmd.Context(), workspaceID, args[0], d)
				if err != nil {
					return err
				}
				return printSaved(cmd, a, asJSON, st)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().StringVar(&file, "file", "", "the definition (JSON); - reads standard input (required)")
	cmd.MarkFlagRequired("file")
	return cmd
}

func newWorkflowGetCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get WORKFLOW_ID --workspace ID|NAME",
		Short: "Show a workflow",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				st, err := a.cmds.Workflows.Workflow(cmd.Context(), workspaceID, args[0])
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, st.View(), workflowLines(st.View())...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}

func newWorkflowListCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	var page, limit int
	cmd := &cobra.Command{
		Use:   "list --workspace ID|NAME [--page N] [--limit N]",
		Short: "List a workspace's workflows, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := projections.NewPage(page, limit)
			if err != nil {
				return fmt.Errorf("--%w", err)
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				list, total, err := a.queries.WorkflowsOf(cmd.Context(), workspaceID, p)
				if err != nil {
					return err
				}
				lines := []string{fmt.Sprintf("%d workflows (page %d)", total, page)}
				for _, w := range list {
					lines = append(lines, fmt.Sprintf("  %s  %s  %s", w.ID, w.CreatedAt.Format("2006-01-02 15:04:05Z07:00"), w.Name))
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"data": list, "total": total, "page": page}, lines...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().IntVar(&page, "page", 1, "page number, from 1")
	cmd.Flags().IntVar(&limit, "limit", 20, "workflows per page, 1 to 100")
	return cmd
}

func newWorkflowDeleteCmd() *cobra.Command {
	var workspaceID string
	cmd := &cobra.Command{
		Use:   "delete WORKFLOW_ID --workspace ID|NAME",
		Short: "Delete a workflow (runs in flight finish; its name is free again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				if err := a.cmds.Workflows.DeleteWorkflow(cmd.Context(), workspaceID, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted workflow %s\n", args[0])
				return nil
			})
		},
	}
	var asJSON bool
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}
