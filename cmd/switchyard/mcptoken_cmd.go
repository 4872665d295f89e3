package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/mcptoken"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/projections"
)

// mcpTokenWarning goes to stderr whenever a token is printed: it is in no event and no table.
const mcpTokenWarning = "warning: the MCP token is shown this once and cannot be recovered; store it now"

func newMCPTokenCmd() *cobra.Command {
	c := &cobra.Command{Use: "mcp-token", Short: "Manage the MCP tokens of a workspace (docs/mcp.md)"}
	c.AddCommand(newMCPTokenCreateCmd(), newMCPTokenListCmd(), newMCPTokenRevokeCmd())
	return c
}

func newMCPTokenCreateCmd() *cobra.Command {
	var workspaceID, label, expiresAt string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --workspace ID|NAME [--label L] [--expires-at RFC3339]",
		Short: "Mint an MCP token for /v1/mcp; the token is printed once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var expires *time.Time
			if expiresAt != "" {
				t, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return fmt.Errorf("--expires-at: want an RFC 3339 time such as 2027-01-31T00:00:00Z: %w", err)
				}
				expires = &t
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				ctx := commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
				m, err := a.cmds.Workspaces.MintMCPToken(ctx, commands.MintMCPToken{WorkspaceID: workspaceID, Label: label, ExpiresAt: expires})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), mcpTokenWarning)
				return printResult(cmd.OutOrStdout(), asJSON, m,
					fmt.Sprintf("created MCP token %s for workspace %s", m.ID, m.WorkspaceID),
					"token:   "+m.Token,
					"label:   "+m.Label,
					"expires: "+formatExpiry(m.ExpiresAt))
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&label, "label", "", "a name for the token, at most 200 characters")
	cmd.Flags().StringVar(&expiresAt, "expires-at", "", "expiry as an RFC 3339 time; none: never expires")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	return cmd
}

func newMCPTokenListCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list --workspace ID|NAME",
		Short: "List a workspace's MCP tokens, revoked ones included (never the tokens themselves)",
		Long: "Lists from the event log rather than the read model, so a token minted a moment ago shows\n" +
			"even when no serve process is running the projections.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				list, err := mcpTokensFromLog(cmd.Context(), a.store, workspaceID)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), map[string]any{"data": list, "total": len(list)})
				}
				if len(list) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "workspace %s has no MCP tokens\n", workspaceID)
					return nil
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "ID\tLABEL\tCREATED\tEXPIRES\tSTATUS")
				now := time.Now()
				for _, t := range list {
					status := "active"
					switch {
					case t.RevokedAt != nil:
						status = "revoked " + t.RevokedAt.UTC().Format(time.RFC3339)
					case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
						status = "expired"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Label, t.CreatedAt.UTC().Format(time.RFC3339), formatExpiry(t.ExpiresAt), status)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {data, total}")
	cmd.MarkFlagRequired("workspace")
	return cmd
}

func newMCPTokenRevokeCmd() *cobra.Command {
	var workspaceID, id, reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke --workspace ID|NAME --id TOKEN_ID [--reason R]",
		Short: "Revoke an MCP token (refused from the next request on); revoking twice is harmless",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				ctx := commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
				if err := a.cmds.Workspaces.RevokeMCPToken(ctx, workspaceID, id, reason); err != nil {
					return err
				}
				t, err := a.cmds.Workspaces.MCPToken(cmd.Context(), id)
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON,
					map[string]any{"id": t.ID, "workspaceId": t.WorkspaceID, "revoked": true, "revokedAt": t.RevokedAt},
					fmt.Sprintf("revoked MCP token %s of workspace %s", t.ID, t.WorkspaceID))
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&id, "id", "", "token id, as create and list print it (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the revocation")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	cmd.MarkFlagRequired("id")
	return cmd
}

func formatExpiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// mcpTokensFromLog folds every MCP token of workspaceID from the event log, newest first.
func mcpTokensFromLog(ctx context.Context, store eventstore.Store, workspaceID string) ([]projections.MCPTokenRow, error) {
	const batch = 1000
	filter := eventstore.Filter{Types: []string{mcptoken.Minted{}.EventType(), mcptoken.Revoked{}.EventType()}}
	states := map[string]mcptoken.State{}
	from := eventstore.Start
	for {
		evs, err := store.ReadAll(ctx, from, batch, filter)
		if err != nil {
			return nil, fmt.Errorf("read MCP tokens: %w", err)
		}
		for _, rec := range evs {
			ev, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return nil, fmt.Errorf("read MCP tokens: %w", err)
			}
			var id, ws string
			switch e := ev.(type) {
			case mcptoken.Minted:
				id, ws = e.ID, e.WorkspaceID
			case mcptoken.Revoked:
				id, ws = e.ID, e.WorkspaceID
			}
			if ws == workspaceID {
				states[id] = states[id].Evolve(ev)
			}
		}
		if len(evs) < batch {
			break
		}
		from = evs[len(evs)-1].Position
	}
	list := make([]projections.MCPTokenRow, 0, len(states))
	for _, s := range states {
		if s.Exists {
			list = append(list, projections.MCPTokenRow{ID: s.ID, WorkspaceID: s.WorkspaceID, Label: s.Label,
				ExpiresAt: s.ExpiresAt, RevokedAt: s.RevokedAt, CreatedAt: s.CreatedAt})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].CreatedAt.Equal(list[j].CreatedAt) {
			return list[i].CreatedAt.After(list[j].CreatedAt)
		}
		return list[i].ID < list[j].ID
	})
	return list, nil
}
