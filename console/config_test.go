package console_test

import (
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/projections"
)

func TestConfigValidate(t *testing.T) {
	cmds, queries, idp := &commands.Commands{}, &projections.Queries{}, &identity.Provider{}
	_, err := console.New(console.Config{Queries: queries, Identity: idp})
	configtest.Check(t, console.Config{Cmds: cmds, Queries: queries, Identity: idp}.Validate(), []configtest.Case{
		{Field: "Cmds", Err: err},
		{Field: "Queries", Err: console.Config{Cmds: cmds, Identity: idp}.Validate()},
		{Field: "Identity", Err: console.Config{Cmds: cmds, Queries: queries}.Validate()},
	})
}
