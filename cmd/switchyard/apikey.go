package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/password"
)

// secretWarning goes to stderr whenever an apiSecret is printed: it is in no event and no table.
const secretWarning = "warning: the apiSecret is shown this once and cannot be recovered; store it now"

func newAPIKeyCmd() *cobra.Command {
	k := &cobra.Command{Use: "apikey", Short: "Manage workspace API keys (docs/authentication.md)"}
	k.AddCommand(newAPIKeyCreateCmd(), newAPIKeyRevokeCmd())
	return k
}

func newAPIKeyCreateCmd() *cobra.Command {
	var workspaceID, label, expiresAt string
	var allowed []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --workspace ID|NAME [--label L] [--allowed-workflow ID]... [--expires-at RFC3339]",
		Short: "Mint an API key; its apiSecret is printed once",
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
				m, err := a.cmds.Workspaces.CreateAPIKey(cmd.Context(), commands.CreateAPIKey{WorkspaceID: workspaceID, Label: label,
					AllowedWorkflowIDs: allowed, ExpiresAt: expires})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), secretWarning)
				return printResult(cmd.OutOrStdout(), asJSON, m, mintedLines(workspaceID, m)...)
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&label, "label", "", "a name for the key, at most 200 characters")
	cmd.Flags().StringArrayVar(&allowed, "allowed-workflow", nil, "limit the key to this workflow id (repeat for several); none: unrestricted")
	cmd.Flags().StringVar(&expiresAt, "expires-at", "", "expiry as an RFC 3339 time; none: never expires")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the SPEC.md 2.10 record)")
	cmd.MarkFlagRequired("workspace")
	return cmd
}

func mintedLines(workspaceID string, m commands.APIKeyMinted) []string {
	scope := "all workflows"
	if len(m.AllowedWorkflowIDs) > 0 {
		scope = strings.Join(m.AllowedWorkflowIDs, ", ")
	}
	expires := "never"
	if m.ExpiresAt != nil {
		expires = m.ExpiresAt.Format(time.RFC3339)
	}
	return []string{
		fmt.Sprintf("created API key %s for workspace %s", m.ID, workspaceID),
		"apiKey:    " + m.APIKey,
		"apiSecret: " + m.APISecret,
		"label:     " + m.Label,
		"workflows: " + scope,
		"expires:   " + expires,
	}
}

func newAPIKeyRevokeCmd() *cobra.Command {
	var id, reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke --id ID [--reason R]",
		Short: "Revoke an API key (every instance refuses it within 5 seconds); revoking twice is harmless",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				if err := a.cmds.Workspaces.RevokeAPIKeyWithReason(cmd.Context(), id, reason); err != nil {
					return err
				}
				k, err := a.cmds.Workspaces.APIKey(cmd.Context(), id)
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON,
					map[string]any{"id": k.ID, "workspaceId": k.WorkspaceID, "revoked": true, "revokedAt": k.RevokedAt},
					fmt.Sprintf("revoked API key %s of workspace %s", k.ID, k.WorkspaceID))
			})
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "key id (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the revocation")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("id")
	return cmd
}

// bootstrapResult is what bootstrap prints: everything a new user needs to call the SDK API.
type bootstrapResult struct {
	UserID      string `json:"userId"`
	WorkspaceID string `json:"workspaceId"`
	APIKey      string `json:"apiKey"`
	APISecret   string `json:"apiSecret"`
	APIKeyID    string `json:"apiKeyId"`
	// Staff is whether the user is staff (reviews OAuth apps at /review): true for a user this
	// bootstrap registered with --staff; a reused user keeps what it had.
	Staff bool `json:"staff"`
}

func newBootstrapCmd() *cobra.Command {
	var email, pw, name, credits, planUsage string
	var ifEmpty, asJSON, staff bool
	cmd := &cobra.Command{
		Use:   "bootstrap --email E --password P --workspace NAME [--credits N] [--plan-usage N] [--staff=false] [--if-empty]",
		Short: "Set up a user, their workspace, credits and an API key in one step",
		Long: "Registers the user (or reuses an existing one whose password matches), creates a workspace\n" +
			"owned by them, adds paid credits and plan-included credits when given, mints an API key and\n" +
			"prints {userId, workspaceId, apiKey, apiSecret, apiKeyId, staff}. A user it registers is staff\n" +
			"(may review OAuth apps at /review) unless --staff=false. With --if-empty it does nothing\n" +
			"and prints {\"skipped\": true} when any workspace exists already (scripts/run.sh runs it so\n" +
			"on every start).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every flag is checked before anything is written.
			var paid, included billing.Credits
			var err error
			if credits != "" {
				if paid, err = billing.ParseCredits(credits); err != nil {
					return fmt.Errorf("--credits: %w", err)
				}
			}
			if planUsage != "" {
				if included, err = billing.ParseCredits(planUsage); err != nil {
					return fmt.Errorf("--plan-usage: %w", err)
				}
			}
			if err := workspace.ValidateName(name); err != nil {
				return fmt.Errorf("--workspace: %w", err)
			}
			// The schema is created if missing, so this one command suffices on a new database. It
			// seals nothing, so it leaves the secret key (and its warning) to serve.
			a, err := openAppFor(cmd.Context(), appOptions{migrate: true, noSealer: true})
			if err != nil {
				return err
			}
			defer a.Close()
			if ifEmpty {
				exists, err := anyWorkspace(cmd.Context(), a.store)
				if err != nil {
					return err
				}
				if exists {
					return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"skipped": true},
						"a workspace exists already: nothing to do")
				}
			}
			res, err := bootstrap(cmd.Context(), a.cmds, commands.RegisterUser{Email: email, Password: pw, Staff: staff}, name, paid, included)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), secretWarning)
			who := fmt.Sprintf("user %s (%s)", res.UserID, email)
			if res.Staff {
				who += ", staff"
			}
			return printResult(cmd.OutOrStdout(), asJSON, res, who,
				fmt.Sprintf("workspace %s (%s), owner %s", res.WorkspaceID, name, email),
				fmt.Sprintf("API key %s", res.APIKeyID),
				"apiKey:    "+res.APIKey,
				"apiSecret: "+res.APISecret)
		},
	}
	cmd.Flags().StringVar(&email, "email", "", "the user's sign-in email (required)")
	cmd.Flags().StringVar(&pw, "password", "", "the user's password, at least 8 characters (required)")
	cmd.Flags().StringVar(&name, "workspace", "", "name of the workspace to create (required)")
	cmd.Flags().StringVar(&credits, "credits", "", "paid credits to add, up to three decimals")
	cmd.Flags().StringVar(&planUsage, "plan-usage", "", "plan-included credits for a first plan period")
	cmd.Flags().BoolVar(&staff, "staff", true, "make a user it registers staff (reviews OAuth apps at /review)")
	cmd.Flags().BoolVar(&ifEmpty, "if-empty", false, `do nothing (and print {"skipped": true}) when any workspace exists`)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("email")
	cmd.MarkFlagRequired("password")
	cmd.MarkFlagRequired("workspace")
	return cmd
}

// bootstrap runs the set-up steps in order. A user who exists already is reused only when the
// password matches, so bootstrap can never hand out a workspace in someone else's account.
func bootstrap(ctx context.Context, h *commands.Commands, reg commands.RegisterUser, name string, paid, included billing.Credits) (bootstrapResult, error) {
	var res bootstrapResult
	email, pw := reg.Email, reg.Password
	userID, err := h.Identity.RegisterUser(ctx, reg)
	res.Staff = reg.Staff
	if errors.Is(err, domain.ErrAlreadyExists) {
		u, uerr := h.Identity.UserByEmail(ctx, email)
		if uerr != nil {
			return res, uerr
		}
		ok, verr := password.Verify(u.PasswordHash, pw)
		if verr != nil {
			return res, fmt.Errorf("verify the password of %s: %w", email, verr)
		}
		if !ok {
			return res, fmt.Errorf("a user with email %s exists already and the password does not match; "+
				"create the workspace with 'switchyard admin workspace create --owner %s' and a key with "+
				"'switchyard admin apikey create': %w", email, email, domain.ErrAlreadyExists)
		}
		userID, err, res.Staff = u.ID, nil, u.Staff
	}
	if err != nil {
		return res, fmt.Errorf("register %s: %w", email, err)
	}
	res.UserID = userID
	if res.WorkspaceID, err = h.Workspaces.CreateWorkspace(ctx, name, email); err != nil {
		return res, err
	}
	if paid > 0 {
		if _, err := h.Billing.TopUp(ctx, res.WorkspaceID, paid, "bootstrap"); err != nil {
			return res, err
		}
	}
	if included > 0 {
		if _, err := h.Billing.RenewPlan(ctx, res.WorkspaceID, included); err != nil {
			return res, err
		}
	}
	m, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: res.WorkspaceID, Label: "bootstrap"})
	if err != nil {
		return res, err
	}
	res.APIKey, res.APISecret, res.APIKeyID = m.APIKey, m.APISecret, m.ID
	return res, nil
}

// anyWorkspace asks the event store, not the read model, whether a workspace was ever created:
// projections may not have run yet when bootstrap does.
func anyWorkspace(ctx context.Context, store eventstore.Store) (bool, error) {
	evs, err := store.ReadAll(ctx, eventstore.Start, 1, eventstore.Filter{Types: []string{workspace.Created{}.EventType()}})
	if err != nil {
		return false, fmt.Errorf("look for workspaces: %w", err)
	}
	return len(evs) > 0, nil
}
