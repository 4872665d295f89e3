package projections_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/projections"
)

func TestEngineConfigValidate(t *testing.T) {
	configtest.Check(t, projections.EngineConfig{BatchSize: 10, RetryBackoff: time.Second}.Validate(), []configtest.Case{
		{Field: "BatchSize", Err: projections.EngineConfig{BatchSize: -1}.Validate()},
		{Field: "RetryBackoff", Err: projections.EngineConfig{RetryBackoff: -time.Second}.Validate()},
		{Field: "BatchInterval", Err: projections.EngineConfig{BatchInterval: time.Minute}.Validate()},
	})
	// NewEngine refuses before it touches the pool or the store.
	_, err := projections.NewEngine(nil, nil, nil, projections.EngineConfig{BatchSize: -1})
	configtest.Check(t, nil, []configtest.Case{{Field: "BatchSize", Err: err}})
}
