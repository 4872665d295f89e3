package identity_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/seal"
)

func TestConfigValidate(t *testing.T) {
	valid := func(f func(*identity.Config)) error {
		c := identity.Config{Issuer: "http://127.0.0.1:8080", Cmds: &commands.Commands{}, Queries: &projections.Queries{}, Sealer: &seal.Sealer{}}
		f(&c)
		return c.Validate()
	}
	_, err := identity.New(identity.Config{Issuer: "http://127.0.0.1:8080"})
	configtest.Check(t, valid(func(c *identity.Config) { c.AccessTTL = time.Minute }), []configtest.Case{
		{Field: "Cmds", Err: err},
		{Field: "Issuer", Err: valid(func(c *identity.Config) { c.Issuer = "" })},
		{Field: "Queries", Err: valid(func(c *identity.Config) { c.Queries = nil })},
		{Field: "Sealer", Err: valid(func(c *identity.Config) { c.Sealer = nil })},
		{Field: "PasswordChecks", Err: valid(func(c *identity.Config) { c.PasswordChecks = -1 })},
		{Field: "AccessTTL", Err: valid(func(c *identity.Config) { c.AccessTTL = -time.Second })},
		{Field: "IDTokenTTL", Err: valid(func(c *identity.Config) { c.IDTokenTTL = -time.Second })},
		{Field: "RefreshTTL", Err: valid(func(c *identity.Config) { c.RefreshTTL = -time.Second })},
		{Field: "SessionTTL", Err: valid(func(c *identity.Config) { c.SessionTTL = -time.Second })},
		{Field: "CodeTTL", Err: valid(func(c *identity.Config) { c.CodeTTL = -time.Second })},
		{Field: "KeyReload", Err: valid(func(c *identity.Config) { c.KeyReload = -time.Second })},
		{Field: "PasswordCheckWait", Err: valid(func(c *identity.Config) { c.PasswordCheckWait = -time.Second })},
		{Field: "Throttle.Window", Err: valid(func(c *identity.Config) { c.Throttle.Window = -time.Second })},
		{Field: "Throttle.PerAccount", Err: identity.ThrottleConfig{PerAccount: -1}.Validate()},
		{Field: "Throttle.PerClientAddr", Err: identity.ThrottleConfig{PerClientAddr: -1}.Validate()},
	})
}
