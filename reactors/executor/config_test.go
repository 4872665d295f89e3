package executor_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/reactors/executor"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, executor.Config{Concurrency: 8, WorkspaceShare: 100, SweepInterval: time.Second}.Validate(), []configtest.Case{
		{Field: "Concurrency", Err: executor.Config{Concurrency: -1}.Validate()},
		{Field: "WorkspaceShare", Err: executor.Config{WorkspaceShare: 101}.Validate()},
		{Field: "SweepInterval", Err: executor.Config{SweepInterval: -time.Second}.Validate()},
		{Field: "SweepGrace", Err: executor.Config{SweepGrace: -time.Second}.Validate()},
		{Field: "TakeoverGrace", Err: executor.Config{TakeoverGrace: -time.Second}.Validate()},
		{Field: "LeaseMargin", Err: executor.Config{LeaseMargin: -time.Second}.Validate()},
		{Field: "RetryBackoff", Err: executor.Config{RetryBackoff: -time.Second}.Validate()},
		{Field: "DrainTimeout", Err: executor.Config{DrainTimeout: -time.Second}.Validate()},
	})
}
