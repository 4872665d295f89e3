package replay_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/configtest"
	"github.com/switchyard/switchyard/internal/replay"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, replay.Config{PurgeEvery: time.Second, PurgeBatch: 10}.Validate(), []configtest.Case{
		{Field: "PurgeEvery", Err: replay.Config{PurgeEvery: -time.Second}.Validate()},
		{Field: "PurgeBatch", Err: replay.Config{PurgeBatch: -1}.Validate()},
		{Field: "Concurrency", Err: replay.Config{Concurrency: -1}.Validate()},
	})
}
