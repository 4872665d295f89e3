package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/identity"
)

// identityProvider builds the OIDC provider of the service, its signing keys loaded (the first
// key is created on the first start).
func (a *app) identityProvider(ctx context.Context) (*identity.Provider, error) {
	p, err := identity.New(identity.Config{Issuer: a.cfg.BaseURL, Cmds: a.cmds, Queries: a.queries, Sealer: a.sealer, Logger: a.log,
		PasswordChecks: a.cfg.PasswordChecks})
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, fmt.Errorf("identity signing keys: %w", err)
	}
	return p, nil
}

func newKeysCmd() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage the token signing keys"}
	var asJSON bool
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Add a new signing key; new tokens use it, older keys stay published until their tokens expire",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				p, err := identity.New(identity.Config{Issuer: a.cfg.BaseURL, Cmds: a.cmds, Queries: a.queries, Sealer: a.sealer, Logger: a.log})
				if err != nil {
					return err
				}
				if err := p.Keys().ReloadFromLog(cmd.Context()); err != nil {
					return err
				}
				previous := p.Keys().CurrentKID()
				kid, err := p.Keys().Rotate(cmd.Context())
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, map[string]any{"kid": kid, "previousKid": previous},
					fmt.Sprintf("new signing key %s (previous %s stays published until its tokens expire)", kid, previous))
			})
		},
	}
	rotate.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	keys.AddCommand(rotate)
	return keys
}
