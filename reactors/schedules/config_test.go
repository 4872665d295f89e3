package schedules_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/reactors/schedules"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, schedules.Config{RetryInterval: time.Second, ScanPage: 100, Concurrency: 4}.Validate(), []configtest.Case{
		{Field: "RetryInterval", Err: schedules.Config{RetryInterval: -time.Second}.Validate()},
		{Field: "ScanPage", Err: schedules.Config{ScanPage: -1}.Validate()},
		{Field: "Concurrency", Err: schedules.Config{Concurrency: -1}.Validate()},
	})
}
