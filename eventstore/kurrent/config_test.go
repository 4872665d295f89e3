package kurrent

import (
	"context"
	"testing"

	"github.com/switchyard/switchyard/internal/configtest"
)

func TestConfigValidate(t *testing.T) {
	configtest.Check(t, Config{StreamPrefix: "p_", ReadBatchSize: 10, MaxResubscribeAttempts: -1}.Validate(), []configtest.Case{
		{Field: "ReadBatchSize", Err: Config{ReadBatchSize: -1}.Validate()},
		{Field: "SubscriptionBuffer", Err: Config{SubscriptionBuffer: -1}.Validate()},
		{Field: "StreamPrefix", Err: Config{StreamPrefix: "$x"}.Validate()},
	})
	// New refuses before it connects.
	_, err := New(context.Background(), "esdb://127.0.0.1:1?tls=false", Config{ReadBatchSize: -1})
	configtest.Check(t, nil, []configtest.Case{{Field: "ReadBatchSize", Err: err}})
}
