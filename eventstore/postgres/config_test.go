package postgres

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, Config{PollInterval: time.Second, BatchSize: 10, GroupConcurrency: 2}.Validate(), []configtest.Case{
		{Field: "PollInterval", Err: Config{PollInterval: -time.Second}.Validate()},
		{Field: "NotifyInterval", Err: Config{NotifyInterval: -time.Second}.Validate()},
		{Field: "BatchSize", Err: Config{BatchSize: -1}.Validate()},
		{Field: "RetryTimeout", Err: Config{RetryTimeout: -time.Second}.Validate()},
		{Field: "GroupConcurrency", Err: Config{GroupConcurrency: -1}.Validate()},
	})
}
