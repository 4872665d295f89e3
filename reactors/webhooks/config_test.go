package webhooks_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/reactors/webhooks"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, webhooks.Config{Concurrency: 4, Timeout: time.Second, RetryFactor: 2}.Validate(), []configtest.Case{
		{Field: "Concurrency", Err: webhooks.Config{Concurrency: -1}.Validate()},
		{Field: "RetryFactor", Err: webhooks.Config{RetryFactor: -1}.Validate()},
		{Field: "Timeout", Err: webhooks.Config{Timeout: -time.Second}.Validate()},
		{Field: "RetryBase", Err: webhooks.Config{RetryBase: -time.Second}.Validate()},
		{Field: "MaxRetryDelay", Err: webhooks.Config{MaxRetryDelay: -time.Second}.Validate()},
		{Field: "LeaseMargin", Err: webhooks.Config{LeaseMargin: -time.Second}.Validate()},
		{Field: "SweepInterval", Err: webhooks.Config{SweepInterval: -time.Second}.Validate()},
		{Field: "SweepGrace", Err: webhooks.Config{SweepGrace: -time.Second}.Validate()},
	})
}
