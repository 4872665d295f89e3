package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	oauthapp "github.com/switchyard/switchyard/domain/app"
)

// cliReviewer is the reviewer recorded for approvals and reverts made with the CLI.
const cliReviewer = "admin-cli"

func newAppCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "app", Short: "Manage OAuth app registrations"}
	cmd.AddCommand(newAppCreateCmd(), newAppReviewCmd("approve"), newAppReviewCmd("revert"))
	return cmd
}

func newAppCreateCmd() *cobra.Command {
	var owner, name, description, logo string
	var redirects, scopes []string
	var approve, public, asJSON bool
	cmd := &cobra.Command{
		Use:   "create --owner EMAIL --name N --redirect-uri U... --scope S... [--approve] [--public]",
		Short: "Register an OAuth app, issue its client secret, and optionally approve it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				ctx := commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
				u, err := a.cmds.Identity.UserByEmail(ctx, owner)
				if err != nil {
					return fmt.Errorf("--owner: %w", err)
				}
				id, err := a.cmds.Apps.RegisterApp(ctx, commands.RegisterApp{OwnerUserID: u.ID, Public: public,
					Metadata: oauthapp.Metadata{Name: name, Description: description, LogoURL: logo, RedirectURIs: redirects, Scopes: scopes}})
				if err != nil {
					return err
				}
				secret := ""
				if !public {
					if secret, err = a.cmds.Apps.IssueAppSecret(ctx, id); err != nil {
						return err
					}
				}
				status := oauthapp.StatusDraft
				if approve {
					if err := a.cmds.Apps.SubmitApp(ctx, id); err != nil {
						return err
					}
					// Revision 1: the app was registered a moment ago by this same command.
					if err := a.cmds.Apps.ApproveApp(ctx, id, cliReviewer, 1); err != nil {
						return err
					}
					status = oauthapp.StatusApproved
				}
				out := map[string]any{"clientId": id, "clientSecret": secret}
				text := fmt.Sprintf("app %s (%s), client id %s", name, status, id)
				if secret != "" {
					text += "\nclient secret (shown once): " + secret
				}
				return printResult(cmd.OutOrStdout(), asJSON, out, text)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "email of the developer who owns the app (required)")
	f.StringVar(&name, "name", "", "app name shown on the consent page (required)")
	f.StringVar(&description, "description", "", "short description")
	f.StringVar(&logo, "logo-url", "", "https URL of the app's logo")
	f.StringArrayVar(&redirects, "redirect-uri", nil, "registered redirect URI, exact match (repeatable, required)")
	f.StringArrayVar(&scopes, "scope", nil, "scope the app may request (repeatable, required)")
	f.BoolVar(&approve, "approve", false, "submit and approve the app at once (staff action)")
	f.BoolVar(&public, "public", false, "a public client (native or browser app): no secret, PKCE only")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	for _, n := range []string{"owner", "name", "redirect-uri", "scope"} {
		cmd.MarkFlagRequired(n)
	}
	return cmd
}

func newAppReviewCmd(action string) *cobra.Command {
	var clientID, reason string
	var revision int
	var asJSON bool
	use := action + " --client-id ID"
	if action == "approve" {
		use += " [--revision N]"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: map[string]string{"approve": "Approve a submitted app (metadata is then locked)", "revert": "Send an app back to draft: its secret stops working, the OAuth flow is disabled"}[action],
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				ctx := commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
				var err error
				if action == "approve" {
					err = approveApp(ctx, cmd, a, clientID, revision)
				} else {
					err = a.cmds.Apps.RevertApp(ctx, clientID, cliReviewer, reason)
				}
				if err != nil {
					return err
				}
				s, err := a.cmds.Apps.App(ctx, clientID)
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"clientId": s.ClientID, "status": s.Status, "revision": s.Revision},
					fmt.Sprintf("app %s is %s (revision %d)", s.ClientID, s.Status, s.Revision))
			})
		},
	}
	cmd.Flags().StringVar(&clientID, "client-id", "", "the app's client id (required)")
	if action == "revert" {
		cmd.Flags().StringVar(&reason, "reason", "", "why, for the developer")
	} else {
		cmd.Flags().IntVar(&revision, "revision", 0, "the revision that was reviewed; refused if the app changed since (default: the current one, printed before it is approved)")
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("client-id")
	return cmd
}

// approveApp approves the revision that was reviewed (--revision), or, without one, the current
// revision, whose metadata it prints first so the operator's log shows what was approved.
func approveApp(ctx context.Context, cmd *cobra.Command, a *app, clientID string, revision int) error {
	if revision == 0 {
		s, err := a.cmds.Apps.App(ctx, clientID)
		if err != nil {
			return err
		}
		m := s.Metadata
		fmt.Fprintf(cmd.ErrOrStderr(), "approving revision %d of %s: name %q, redirect URIs %v, scopes %v\n",
			s.Revision, s.ClientID, m.Name, m.RedirectURIs, m.Scopes)
		revision = s.Revision
	}
	err := a.cmds.Apps.ApproveApp(ctx, clientID, cliReviewer, revision)
	if errors.Is(err, oauthapp.ErrRevisionChanged) {
		return fmt.Errorf("--revision %d: %w", revision, err)
	}
	return err
}
