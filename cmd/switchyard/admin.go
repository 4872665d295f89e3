package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/billing"
)

func newAdminCmd() *cobra.Command {
	admin := &cobra.Command{Use: "admin", Short: "Administer users, workspaces and billing"}
	user := &cobra.Command{Use: "user", Short: "Manage users"}
	user.AddCommand(newUserCreateCmd())
	ws := &cobra.Command{Use: "workspace", Short: "Manage workspaces"}
	ws.AddCommand(newWorkspaceCreateCmd(), newWorkspaceAddMemberCmd(), newWorkspaceSetRoleCmd(), newWorkspaceRemoveMemberCmd())
	credits := &cobra.Command{Use: "credits", Short: "Manage paid credit"}
	credits.AddCommand(newTopUpCmd())
	plan := &cobra.Command{Use: "plan", Short: "Manage plan-included credit"}
	plan.AddCommand(newPlanRenewCmd())
	admin.AddCommand(user, ws, credits, plan, newAPIKeyCmd(), newBootstrapCmd())
	admin.AddCommand(newAppCmd(), newKeysCmd())
	admin.AddCommand(newMCPTokenCmd(), newWorkflowCmd(), newModuleCmd(), newEventCmd())
	return admin
}

func newUserCreateCmd() *cobra.Command {
	var email, password, name string
	var staff, asJSON bool
	cmd := &cobra.Command{
		Use:   "create --email E --password P [--name N] [--staff]",
		Short: "Register a user (password hashed with argon2id)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				id, err := a.cmds.Identity.RegisterUser(cmd.Context(), commands.RegisterUser{Email: email, Password: password, Name: name, Staff: staff})
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"userId": id, "email": email, "staff": staff},
					fmt.Sprintf("created user %s (%s)", id, email))
			})
		},
	}
	cmd.Flags().StringVar(&email, "email", "", "sign-in email (required)")
	cmd.Flags().StringVar(&password, "password", "", "sign-in password, at least 8 characters (required)")
	cmd.Flags().StringVar(&name, "name", "", "display name")
	cmd.Flags().BoolVar(&staff, "staff", false, "make the user staff (reviews OAuth apps)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("email")
	cmd.MarkFlagRequired("password")
	return cmd
}

func newWorkspaceCreateCmd() *cobra.Command {
	var name, owner string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --name N --owner EMAIL",
		Short: "Create a workspace owned by an existing user",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				id, err := a.cmds.Workspaces.CreateWorkspace(cmd.Context(), name, owner)
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"workspaceId": id, "name": name, "owner": owner},
					fmt.Sprintf("created workspace %s (%s), owner %s", id, name, owner))
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "workspace name (required)")
	cmd.Flags().StringVar(&owner, "owner", "", "email of the owning user (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("name")
	cmd.MarkFlagRequired("owner")
	return cmd
}

func newWorkspaceAddMemberCmd() *cobra.Command {
	var workspaceID, email, role string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add-member --workspace ID|NAME --email E [--role owner|admin|member]",
		Short: "Make a user a member of a workspace (a member already: use set-role)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				if err := a.cmds.Workspaces.AddMember(cmd.Context(), workspaceID, email, role); err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"workspaceId": workspaceID, "email": email, "role": role},
					fmt.Sprintf("%s is %s of %s", email, role, workspaceID))
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&email, "email", "", "member's email (required)")
	cmd.Flags().StringVar(&role, "role", "member", "owner, admin or member")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	cmd.MarkFlagRequired("email")
	return cmd
}

func newWorkspaceSetRoleCmd() *cobra.Command {
	var workspaceID, email, role string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "set-role --workspace ID|NAME --email E --role owner|admin|member",
		Short: "Change a member's role (never the last owner's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				err := a.cmds.Workspaces.ChangeMemberRole(cmd.Context(), commands.MemberChange{WorkspaceID: workspaceID, Email: email, Role: role, Operator: true})
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"workspaceId": workspaceID, "email": email, "role": role},
					fmt.Sprintf("%s is %s of %s", email, role, workspaceID))
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&email, "email", "", "member's email (required)")
	cmd.Flags().StringVar(&role, "role", "", "owner, admin or member (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	cmd.MarkFlagRequired("email")
	cmd.MarkFlagRequired("role")
	return cmd
}

func newWorkspaceRemoveMemberCmd() *cobra.Command {
	var workspaceID, email string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "remove-member --workspace ID|NAME --email E",
		Short: "Take a member out of a workspace (never the last owner)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				if err := a.cmds.Workspaces.RemoveMember(cmd.Context(), commands.MemberChange{WorkspaceID: workspaceID, Email: email, Operator: true}); err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"workspaceId": workspaceID, "email": email, "removed": true},
					fmt.Sprintf("%s is no longer a member of %s", email, workspaceID))
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&email, "email", "", "member's email (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	cmd.MarkFlagRequired("email")
	return cmd
}

func newTopUpCmd() *cobra.Command {
	var workspaceID, amount, reference string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "topup --workspace ID|NAME --amount N [--reference R]",
		Short: "Add paid credit (never expires); a reference makes the top-up idempotent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			amt, err := billing.ParseCredits(amount)
			if err != nil {
				return fmt.Errorf("--amount: %w", err)
			}
			return billingCommand(cmd, &workspaceID, asJSON, func(a *app) error {
				_, err := a.cmds.Billing.TopUp(cmd.Context(), workspaceID, amt, reference)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&amount, "amount", "", "credits to add, up to three decimals (required)")
	cmd.Flags().StringVar(&reference, "reference", "", "payment reference; the same reference is credited once")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	cmd.MarkFlagRequired("amount")
	return cmd
}

func newPlanRenewCmd() *cobra.Command {
	var workspaceID, included string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "renew --workspace ID|NAME --included N",
		Short: "Start a plan period: the plan-included balance is reset to N",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			amt, err := billing.ParseCredits(included)
			if err != nil {
				return fmt.Errorf("--included: %w", err)
			}
			return billingCommand(cmd, &workspaceID, asJSON, func(a *app) error {
				_, err := a.cmds.Billing.RenewPlan(cmd.Context(), workspaceID, amt)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&workspaceID, "workspace", "", workspaceFlagHelp)
	cmd.Flags().StringVar(&included, "included", "", "plan-included credits for the new period (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("workspace")
	cmd.MarkFlagRequired("included")
	return cmd
}

// billingCommand runs a billing change of the workspace *ref names (resolveWorkspace sets it to
// the id) and prints the balance folded from the event store.
func billingCommand(cmd *cobra.Command, ref *string, asJSON bool, change func(*app) error) error {
	a, err := openApp(cmd.Context(), false)
	if err != nil {
		return err
	}
	defer a.Close()
	if *ref, err = resolveWorkspace(cmd.Context(), a, *ref); err != nil {
		return err
	}
	workspaceID := *ref
	if err := change(a); err != nil {
		return err
	}
	s, err := a.cmds.Billing.Balance(cmd.Context(), workspaceID)
	if err != nil {
		return err
	}
	bal := map[string]any{"workspaceId": workspaceID, "credit": s.Credit, "usage": s.Usage, "total": s.Total()}
	return printResult(cmd.OutOrStdout(), asJSON, bal,
		fmt.Sprintf("workspace %s: credit %s, usage %s, total %s", workspaceID, s.Credit, s.Usage, s.Total()))
}
