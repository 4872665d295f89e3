package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/projections"
)

// The operator at the command line acts as a workspace owner would: it may let a module
// reach private addresses (allowPrivate).
var operatorRights = access.Rights{Role: workspace.RoleOwner, Scopes: []string{access.ScopeWorkspaceAdmin}}

func newModuleCmd() *cobra.Command {
	m := &cobra.Command{Use: "module", Short: "Manage a workspace's own modules (docs/modules.md)"}
	m.AddCommand(newModuleRegisterCmd(), newModuleUpdateCmd(), newModuleShowCmd(), newModuleListCmd(), newModuleDeleteCmd())
	return m
}

// readModuleFile reads a module's settings (the body of POST .../modules) from a file, or
// standard input for "-".
func readModuleFile(cmd *cobra.Command, path string) (httpapi.ModuleBody, error) {
	body, err := readFileFlag(cmd, path, 1<<20)
	if err != nil {
		return httpapi.ModuleBody{}, err
	}
	b, err := httpapi.DecodeModuleBody(body)
	if err != nil {
		return b, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

func moduleLines(m projections.ModuleRow) []string {
	lines := []string{fmt.Sprintf("module %s (version %d) in workspace %s", m.Name, m.Version, m.WorkspaceID)}
	if m.Description != "" {
		lines = append(lines, "  description: "+m.Description)
	}
	lines = append(lines, fmt.Sprintf("  price: %s credits   timeoutMs: %d   cacheable: %t   concurrency: %d", m.Price, m.TimeoutMs, m.Cacheable, m.Concurrency),
		fmt.Sprintf("  transport: %s %s   allowPrivate: %t   signed: %t", m.Transport.Type, m.Transport.URL, m.Transport.AllowPrivate, m.Transport.Signed))
	return lines
}

// saveModule reads the file and registers or updates the module with it.
func saveModule(cmd *cobra.Command, workspaceID, name, file string, asJSON bool, update bool) error {
	b, err := readModuleFile(cmd, file)
	if err != nil {
		return err
	}
	return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
		if update {
			if b.Name != "" && b.Name != name {
				return fmt.Errorf("name: a module cannot be renamed (the file says %q)", b.Name)
			}
			b.Name = name
		}
		c, err := b.Command(workspaceID)
		if err != nil {
			return err
		}
		c.By = operatorRights
		ctx := commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
		save := a.cmds.Modules.Register
		if update {
			save = a.cmds.Modules.Update
		}
		m, err := save(ctx, c)
		if err != nil {
			return err
		}
		v := projections.ModuleView(m)
		return printResult(cmd.OutOrStdout(), asJSON, v, moduleLines(v)...)
	})
}

func newModuleRegisterCmd() *cobra.Command {
	var workspaceID, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "register --workspace ID|NAME --file module.json",
		Short: "Register a module from a JSON file (the body of POST /v1/workspaces/{id}/modules)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return saveModule(cmd, workspaceID, "", file, asJSON, false)
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().StringVar(&file, "file", "", "the module's settings (JSON, docs/modules.md); - reads standard input (required)")
	cmd.MarkFlagRequired("file")
	return cmd
}

func newModuleUpdateCmd() *cobra.Command {
	var workspaceID, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "update NAME --workspace ID|NAME --file module.json",
		Short: "Replace a module's settings (an http transport without a secret keeps the module's)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return saveModule(cmd, workspaceID, args[0], file, asJSON, true)
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().StringVar(&file, "file", "", "the module's settings (JSON); - reads standard input (required)")
	cmd.MarkFlagRequired("file")
	return cmd
}

func newModuleShowCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME --workspace ID|NAME",
		Short: "Show a module (never its secret)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				m, err := a.cmds.Modules.Get(cmd.Context(), workspaceID, args[0])
				if err != nil {
					return err
				}
				v := projections.ModuleView(m)
				return printResult(cmd.OutOrStdout(), asJSON, v, moduleLines(v)...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}

func newModuleListCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	var page, limit int
	cmd := &cobra.Command{
		Use:   "list --workspace ID|NAME [--page N] [--limit N]",
		Short: "List a workspace's modules by name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := projections.NewPage(page, limit)
			if err != nil {
				return fmt.Errorf("--%w", err)
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				list, total, err := a.queries.ModulesOf(cmd.Context(), workspaceID, p)
				if err != nil {
					return err
				}
				lines := []string{fmt.Sprintf("%d modules (page %d)", total, page)}
				for _, m := range list {
					lines = append(lines, fmt.Sprintf("  %-40s %-6s %s credits  %s", m.Name, m.Transport.Type, m.Price, m.Description))
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"data": list, "total": total, "page": page}, lines...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	cmd.Flags().IntVar(&page, "page", 1, "page number, from 1")
	cmd.Flags().IntVar(&limit, "limit", 20, "modules per page, 1 to 100")
	return cmd
}

func newModuleDeleteCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delete NAME --workspace ID|NAME",
		Short: "Delete a module (its tasks in flight finish; new submits naming it are refused)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				ctx := commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
				if err := a.cmds.Modules.Delete(ctx, workspaceID, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted module %s\n", args[0])
				return nil
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}
