package modules

import (
	"testing"

	"github.com/switchyard/switchyard/internal/configtest"
)

func TestBuiltinsConfigValidate(t *testing.T) {
	configtest.Check(t, BuiltinsConfig{MaxHTTPResponseBytes: 10}.Validate(), []configtest.Case{
		{Field: "MaxHTTPResponseBytes", Err: BuiltinsConfig{MaxHTTPResponseBytes: -1}.Validate()},
	})
	// Builtins returns no error: setDefaults repairs the value instead.
	c := BuiltinsConfig{MaxHTTPResponseBytes: -1}
	c.setDefaults()
	if c.MaxHTTPResponseBytes != DefaultMaxHTTPResponseBytes || c.Validate() != nil {
		t.Errorf("setDefaults left MaxHTTPResponseBytes %d", c.MaxHTTPResponseBytes)
	}
}
