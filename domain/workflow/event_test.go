package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

func TestParseEventNamesTheField(t *testing.T) {
	cases := []struct{ config, field string }{
		{`{}`, "config.name"},
		{`{"name": ""}`, "config.name"},
		{`{"name": "-bad"}`, "config.name"},
		{`{"name": "order paid"}`, "config.name"},
		{`{"name": "` + strings.Repeat("a", 201) + `"}`, "config.name"},
		{`{"name": "order.paid", "filter": "  "}`, "config.filter"},
		{`{"name": "order.paid", "other": 1}`, "config"},
		{`{"name": "order.paid", "debounce": {}}`, "config.debounce.quietMs"},
		{`{"name": "order.paid", "debounce": {"quietMs": 50}}`, "config.debounce.quietMs"},
		{`{"name": "order.paid", "debounce": {"quietMs": 1000, "maxWaitMs": 500}}`, "config.debounce.maxWaitMs"},
		{`{"name": "order.paid", "debounce": {"quietMs": 1000, "maxItems": 1001}}`, "config.debounce.maxItems"},
		{`{"name": "order.paid", "debounce": {"quietMs": 1000, "key": " "}}`, "config.debounce.key"},
		{`{"name": "order.paid", "debounce": {"quietMs": 1000, "every": 1}}`, "config.debounce"},
	}
	for _, c := range cases {
		_, err := workflow.ParseEvent(json.RawMessage(c.config))
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: got %v, want a 400 naming %s", c.config, err, c.field)
		}
	}
}

func TestParseEventDefaults(t *testing.T) {
	c, err := workflow.ParseEvent(json.RawMessage(`{"name": "order.paid", "filter": "amount > 100", "debounce": {"key": "customer", "quietMs": 2000}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "order.paid" || c.Filter != "amount > 100" || c.Debounce == nil {
		t.Fatalf("parsed %+v", c)
	}
	if d := *c.Debounce; d.MaxWaitMs != 20000 || d.MaxItems != workflow.DefaultDebounceItems || d.Key != "customer" {
		t.Fatalf("debounce defaults %+v", d)
	}
	if d, err := workflow.ParseDebounce(json.RawMessage(`{"secret": "x"}`)); d != nil || err != nil {
		t.Fatalf("a config without debounce: %v %v", d, err)
	}
}

// A definition's trigger expressions are compiled by the checks it is given, and the error
// names the component's field.
func TestValidateTriggerExpressionsNamesTheField(t *testing.T) {
	d := workflow.Definition{Name: "e", Components: []workflow.Component{
		{ID: "on", Module: workflow.ModuleOnEvent, Config: json.RawMessage(`{"name": "a", "filter": "bad filter", "debounce": {"quietMs": 1000, "key": "k"}}`)}}}
	refuse := func(src string) func(string) error {
		return func(s string) error {
			if s == src {
				return errors.New("does not compile")
			}
			return nil
		}
	}
	err := d.ValidateTriggerExpressions(refuse("bad filter"), refuse(""))
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != `components[0] (component "on").config.filter` {
		t.Fatalf("filter: %v", err)
	}
	err = d.ValidateTriggerExpressions(refuse(""), refuse("k"))
	if !errors.As(err, &ve) || ve.Field != `components[0] (component "on").config.debounce.key` {
		t.Fatalf("key: %v", err)
	}
	if err := d.ValidateTriggerExpressions(refuse(""), refuse("")); err != nil {
		t.Fatal(err)
	}
}
