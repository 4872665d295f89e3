package httpapi_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/configtest"
)

func TestServerConfigValidate(t *testing.T) {
	configtest.Check(t, httpapi.ServerConfig{MaxBodyBytes: 1 << 10}.Validate(), []configtest.Case{
		{Field: "MaxBodyBytes", Err: httpapi.ServerConfig{MaxBodyBytes: -1}.Validate()},
	})
}

func TestSDKAuthConfigValidate(t *testing.T) {
	lookup := httpapi.KeyLookup(func(context.Context, string) (httpapi.SDKKey, error) { return httpapi.SDKKey{}, nil })
	valid := func(f func(*httpapi.SDKAuthConfig)) error {
		c := httpapi.SDKAuthConfig{Lookup: lookup}
		f(&c)
		return c.Validate()
	}
	configtest.Check(t, valid(func(c *httpapi.SDKAuthConfig) { c.RatePerSecond = 10 }), []configtest.Case{
		{Field: "Lookup", Err: httpapi.SDKAuthConfig{}.Validate()},
		{Field: "Skew", Err: valid(func(c *httpapi.SDKAuthConfig) { c.Skew = -time.Second })},
		{Field: "CacheTTL", Err: valid(func(c *httpapi.SDKAuthConfig) { c.CacheTTL = time.Hour })},
		{Field: "RatePerSecond", Err: valid(func(c *httpapi.SDKAuthConfig) { c.RatePerSecond = math.NaN() })},
		{Field: "Burst", Err: valid(func(c *httpapi.SDKAuthConfig) { c.Burst = -1 })},
		{Field: "MaxStreamsPerKey", Err: valid(func(c *httpapi.SDKAuthConfig) { c.MaxStreamsPerKey = -1 })},
		{Field: "UnknownKeyRate", Err: valid(func(c *httpapi.SDKAuthConfig) { c.UnknownKeyRate = -1 })},
		{Field: "UnknownKeyBurst", Err: valid(func(c *httpapi.SDKAuthConfig) { c.UnknownKeyBurst = -1 })},
	})
}
