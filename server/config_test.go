package server_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/server"
)

func TestRoutesConfigValidate(t *testing.T) {
	cmds, queries := &commands.Commands{}, &projections.Queries{}
	_, err := server.Routes(server.RoutesConfig{Queries: queries})
	configtest.Check(t, server.RoutesConfig{Cmds: cmds, Queries: queries}.Validate(), []configtest.Case{
		{Field: "Cmds", Err: err},
		{Field: "Queries", Err: server.RoutesConfig{Cmds: cmds}.Validate()},
		{Field: "CacheWindow", Err: server.RoutesConfig{Cmds: cmds, Queries: queries, CacheWindow: -time.Second}.Validate()},
		{Field: "Heartbeat", Err: server.RoutesConfig{Cmds: cmds, Queries: queries, Heartbeat: -time.Second}.Validate()},
		{Field: "MaxBodyBytes", Err: server.RoutesConfig{Cmds: cmds, Queries: queries, Server: httpapi.ServerConfig{MaxBodyBytes: -1}}.Validate()},
	})
}
