package modules_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/switchyard/switchyard/modules"
)

func TestPayloadExpressionReadsFieldsAndPayload(t *testing.T) {
	body := json.RawMessage(`{"customer": {"id": "c-7", "tier": 2}, "region": "eu"}`)
	cases := []struct{ src, want string }{
		{`customer.id`, `"c-7"`},
		{`payload.region + "/" + customer.id`, `"eu/c-7"`},
		{`customer.tier`, `2`},
		{`missing`, `null`},
		{`{"r": region}`, `{"r":"eu"}`},
	}
	for _, c := range cases {
		p, err := modules.CompilePayloadExpression("key", c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := p.Eval(context.Background(), body)
		if err != nil || string(got) != c.want {
			t.Fatalf("%s: got %s %v, want %s", c.src, got, err, c.want)
		}
	}
}

func TestPayloadExpressionErrors(t *testing.T) {
	_, err := modules.CompilePayloadExpression("concurrency.key", `customer +`)
	var ve *modules.ValidationError
	if !errors.As(err, &ve) || ve.Field != "concurrency.key" {
		t.Fatalf("compile error: %v", err)
	}
	p, err := modules.CompilePayloadExpression("key", `customer.id.x`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(context.Background(), json.RawMessage(`{"customer": 5}`)); err == nil {
		t.Fatal("a member of a number evaluated")
	}
}
