package scheduler_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/reactors/scheduler"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, scheduler.Config{Concurrency: 4, SweepInterval: time.Second}.Validate(), []configtest.Case{
		{Field: "SweepInterval", Err: scheduler.Config{SweepInterval: -time.Second}.Validate()},
		{Field: "SweepGrace", Err: scheduler.Config{SweepGrace: -time.Second}.Validate()},
		{Field: "Concurrency", Err: scheduler.Config{Concurrency: -1}.Validate()},
	})
}
