package debounce_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/reactors/debounce"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, debounce.Config{SweepInterval: time.Second, RetryDelay: time.Second, SweepLimit: 10}.Validate(), []configtest.Case{
		{Field: "SweepInterval", Err: debounce.Config{SweepInterval: -time.Second}.Validate()},
		{Field: "RetryDelay", Err: debounce.Config{RetryDelay: -time.Second}.Validate()},
		{Field: "SweepLimit", Err: debounce.Config{SweepLimit: -1}.Validate()},
	})
}
