package bulks_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/reactors/bulks"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, bulks.Config{Concurrency: 4, SweepInterval: time.Second}.Validate(), []configtest.Case{
		{Field: "SweepInterval", Err: bulks.Config{SweepInterval: -time.Second}.Validate()},
		{Field: "Concurrency", Err: bulks.Config{Concurrency: -1}.Validate()},
	})
}
