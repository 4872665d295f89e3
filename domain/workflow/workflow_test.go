package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

func checkModules(module string, config json.RawMessage) error {
	switch module {
	case "core.echo":
		if string(config) != "{}" {
			return domain.Invalid("config.extra", "is not a known field")
		}
		return nil
	default:
		return domain.Invalid("module", "unknown module %q", module)
	}
}

func parse(t *testing.T, js string) workflow.Definition {
	t.Helper()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	d.Normalize(func() string { n++; return "gen" + string(rune('0'+n)) })
	return d
}

func TestValidateNamesTheComponentAtFault(t *testing.T) {
	const trig = `{"id": "t", "module": "ON_API_CALLED"}`
	cases := []struct {
		name, def, field string
	}{
		{"no name", `{"components": [` + trig + `]}`, "name"},
		{"no trigger", `{"name": "w", "components": [{"id": "a", "module": "core.echo"}]}`, "components"},
		{"unknown module", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "nope"}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").module`},
		{"bad config", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "config": {"x": 1}}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").config.extra`},
		{"dangling edge", `{"name": "w", "components": [` + trig + `], "edges": [{"from": "t", "to": "ghost"}]}`, "edges[0].to"},
		{"cycle", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo"}, {"id": "b", "module": "core.echo"}],
			"edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "a"}]}`, `(component "a")`},
		{"for each without source", `{"name": "w", "components": [` + trig + `, {"id": "e", "module": "FOR_EACH", "config": {}}], "edges": [{"from": "t", "to": "e"}]}`, `components[1] (component "e").config.items`},
		{"for each without upstream", `{"name": "w", "components": [` + trig + `, {"id": "e", "module": "FOR_EACH", "config": {"items": "."}}]}`, `(component "e")`},
		{"unreachable", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo"}]}`, `(component "a")`},
		{"trigger with input", `{"name": "w", "components": [` + trig + `, {"id": "u", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
			"edges": [{"from": "u", "to": "a"}, {"from": "a", "to": "t"}]}`, `(component "t")`},
		{"attempts", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED", "attempts": 4}]}`, "attempts"},
		{"retry attempts", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "retry": {"attempts": 11}}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").retry.attempts`},
		{"retry coefficient", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "retry": {"attempts": 3, "backoffCoefficient": 11}}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").retry.backoffCoefficient`},
		{"retry interval", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "retry": {"attempts": 3, "initialIntervalMs": 50}}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").retry.initialIntervalMs`},
		{"retry max interval", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "retry": {"attempts": 3, "initialIntervalMs": 500, "maxIntervalMs": 400}}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").retry.maxIntervalMs`},
		{"attempts beside retry", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "attempts": 2, "retry": {"attempts": 5}}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").attempts`},
		{"ten attempts without retry", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "attempts": 10}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").attempts`},
		{"retry on a trigger", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED", "retry": {"attempts": 2}}]}`, `components[0] (component "t").retry`},
		{"attempt timeout too short", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "timeoutMs": 99}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").timeoutMs`},
		{"attempt timeout too long", `{"name": "w", "components": [` + trig + `, {"id": "a", "module": "core.echo", "timeoutMs": 3600001}], "edges": [{"from": "t", "to": "a"}]}`, `components[1] (component "a").timeoutMs`},
		{"attempt timeout on a trigger", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED", "timeoutMs": 1000}]}`, `components[0] (component "t").timeoutMs`},
		{"run timeout", `{"name": "w", "timeoutMs": 50, "components": [` + trig + `]}`, "timeoutMs"},
		{"duplicate id", `{"name": "w", "components": [` + trig + `, ` + trig + `]}`, "components[1].id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := parse(t, c.def).Validate(checkModules)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a validation error, got %v", err)
			}
			if !strings.Contains(ve.Field, c.field) {
				t.Fatalf("field %q does not name %q (%v)", ve.Field, c.field, err)
			}
		})
	}
}

func TestValidDefinitionWithGeneratedIDs(t *testing.T) {
	d := parse(t, `{"name": "w", "components": [{"module": "ON_API_CALLED", "position": [1.5, -2]}]}`)
	if err := d.Validate(checkModules); err != nil {
		t.Fatal(err)
	}
	c := d.Components[0]
	if c.ID != "gen1" || c.Name != "gen1" || c.Attempts != 1 || string(c.Config) != "{}" || c.Position != (workflow.Position{1.5, -2}) {
		t.Fatalf("normalized component %+v", c)
	}
}

func TestComponentUpdateMergesConfigAndKeepsTheRest(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	d := parse(t, `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"a": 1, "b": 2}}]}`)
	events, _ := workflow.DecideCreate(workflow.State{}, "wf", "ws", d, now)
	s := workflow.State{}.Evolve(events[0])
	events, err := workflow.DecideUpdateComponent(s, "t", workflow.ComponentPatch{Config: json.RawMessage(`{"b": null, "c": 3}`)}, checkModules, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	s = s.Evolve(events[0])
	c, _ := s.Component("t")
	if string(c.Config) != `{"a":1,"c":3}` || c.Name != "t" || !c.UpdatedAt.Equal(now.Add(time.Minute)) || s.Version != 2 {
		t.Fatalf("after update: %+v (version %d)", c, s.Version)
	}
	bad := workflow.Position{0, 0}
	if _, err := workflow.DecideUpdateComponent(s, "ghost", workflow.ComponentPatch{Position: &bad}, checkModules, now); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown component: %v", err)
	}
	empty := " "
	if _, err := workflow.DecideUpdateComponent(s, "t", workflow.ComponentPatch{Name: &empty}, checkModules, now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
}

func TestNameReservationFollowsTheHolder(t *testing.T) {
	now := time.Now()
	holder := workflow.State{Exists: true, ID: "a", Definition: workflow.Definition{Name: "Daily"}}
	r := workflow.Reservation{WorkflowID: "a"}
	if _, err := workflow.DecideReserve(r, holder, "ws", " daily ", "b", now); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("taken name: %v", err)
	}
	holder.Deleted = true
	if events, err := workflow.DecideReserve(r, holder, "ws", "daily", "b", now); err != nil || len(events) != 1 {
		t.Fatalf("name of a deleted workflow: %v %v", events, err)
	}
	// A create under way (reserved, workflow not written yet) holds the name; a dead one, not for long.
	pending := workflow.Reservation{WorkflowID: "c", At: now}
	if _, err := workflow.DecideReserve(pending, workflow.State{}, "ws", "daily", "d", now.Add(time.Second)); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("name of a create under way: %v", err)
	}
	if _, err := workflow.DecideReserve(pending, workflow.State{}, "ws", "daily", "d", now.Add(workflow.PendingCreate)); err != nil {
		t.Fatalf("name of a create that died: %v", err)
	}
}

func TestLookupAndBuildInput(t *testing.T) {
	doc := json.RawMessage(`{"body": {"items": [{"name": "x"}]}}`)
	if v, ok := workflow.Lookup(doc, "body.items.0.name"); !ok || string(v) != `"x"` {
		t.Fatalf("lookup: %s %v", v, ok)
	}
	if v, ok := workflow.Lookup(doc, "body.missing"); ok || string(v) != "null" {
		t.Fatalf("missing: %s %v", v, ok)
	}
	in := workflow.BuildInput([]workflow.Upstream{
		{Edge: workflow.Edge{From: "a"}, Output: json.RawMessage(`{"k": 1}`)},
		{Edge: workflow.Edge{From: "b"}, Output: json.RawMessage(`[1]`)},
		{Edge: workflow.Edge{From: "c", Mapping: map[string]string{"name": "body.items.0.name"}}, Output: doc},
	})
	if string(in) != `{"b":[1],"k":1,"name":"x"}` {
		t.Fatalf("input %s", in)
	}
}

// Normalize works on its own copy: a definition passed by value to two callers at once shares
// its components, and must come out of the other's Normalize as it went in.
func TestNormalizeLeavesASharedDefinitionAlone(t *testing.T) {
	orig := workflow.Definition{Name: " n ", Components: []workflow.Component{{Module: workflow.ModuleTrigger}}}
	cp := orig
	cp.Normalize(func() string { return "generated" })
	if cp.Components[0].ID != "generated" || cp.Components[0].Attempts != 1 {
		t.Fatalf("normalized copy: %+v", cp.Components[0])
	}
	if c := orig.Components[0]; c.ID != "" || c.Attempts != 0 || c.Name != "" || c.Config != nil {
		t.Fatalf("Normalize wrote through the shared components: %+v", c)
	}
}

// A position is two numbers: null is not a number, though encoding/json would read it as 0.
func TestPositionIsTwoNumbers(t *testing.T) {
	for _, js := range []string{`[1, null]`, `[null, 2]`, `[null, null]`, `null`, `[1]`, `[1, 2, 3]`, `["1", 2]`, `{}`} {
		var p workflow.Position
		if err := json.Unmarshal([]byte(js), &p); !errors.Is(err, workflow.ErrPosition) {
			t.Errorf("position %s: %v, want ErrPosition", js, err)
		}
	}
	var p workflow.Position
	if err := json.Unmarshal([]byte(`[1.5, -2]`), &p); err != nil || p != (workflow.Position{1.5, -2}) {
		t.Fatalf("[1.5, -2]: %v %v", p, err)
	}
}

// Text PostgreSQL's jsonb cannot store (NUL, a lone surrogate, invalid UTF-8) is a validation
// error naming the field, not a failure when the event is written.
func TestDefinitionTextMustBeStorable(t *testing.T) {
	for _, tc := range []struct{ name, js, field string }{
		{"NUL in the name", `{"name": "a\u0000b", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`, "name"},
		{"NUL in the description", `{"name": "w", "description": "\u0000", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`, "description"},
		{"NUL in a component name", `{"name": "w", "components": [{"id": "t", "name": "x\u0000", "module": "ON_API_CALLED"}]}`, `components[0] (component "t").name`},
		{"lone surrogate in config", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"a": "\ud800"}}]}`, `components[0] (component "t").config`},
		{"NUL in config", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED", "config": {"\u0000": 1}}]}`, `components[0] (component "t").config`},
		{"NUL in a mapping", `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"}, {"id": "a", "module": "core.echo"}],
			"edges": [{"from": "t", "to": "a", "mapping": {"k": "x\u0000"}}]}`, "edges[0].mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(t, tc.js).Validate(checkModules)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("Validate: %v, want a validation error on %s", err, tc.field)
			}
		})
	}
	// Invalid UTF-8 in a raw config.
	d := parse(t, `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)
	d.Components[0].Config = json.RawMessage("{\"a\": \"\xff\"}")
	var ve *domain.ValidationError
	if err := d.Validate(checkModules); !errors.As(err, &ve) || !strings.HasSuffix(ve.Field, ".config") {
		t.Fatalf("invalid UTF-8 in config: %v", err)
	}
}

func TestComponentUpdateTextMustBeStorable(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	d := parse(t, `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`)
	events, _ := workflow.DecideCreate(workflow.State{}, "wf", "ws", d, now)
	s := workflow.State{}.Evolve(events[0])
	name := "a\x00b"
	for field, p := range map[string]workflow.ComponentPatch{
		"name":   {Name: &name},
		"config": {Config: json.RawMessage(`{"a": "\ud800"}`)},
	} {
		_, err := workflow.DecideUpdateComponent(s, "t", p, checkModules, now)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("patch of %s: %v, want a validation error on %s", field, err, field)
		}
	}
}

func TestRetryPolicyNormalized(t *testing.T) {
	d := parse(t, `{"name": "w", "components": [{"id": "t", "module": "ON_API_CALLED"},
		{"id": "a", "module": "core.echo", "retry": {"attempts": 8, "nonRetryableErrors": ["bad_input"]}},
		{"id": "b", "module": "core.echo", "attempts": 3, "retry": {"initialIntervalMs": 100}},
		{"id": "c", "module": "core.echo", "attempts": 2}],
		"edges": [{"from": "t", "to": "a"}, {"from": "t", "to": "b"}, {"from": "t", "to": "c"}]}`)
	if err := d.Validate(checkModules); err != nil {
		t.Fatal(err)
	}
	a, b, c := d.Components[1], d.Components[2], d.Components[3]
	if a.Attempts != 8 || a.Retry.Attempts != 8 || a.Retry.InitialIntervalMs != 1000 || a.Retry.BackoffCoefficient != 2 {
		t.Fatalf("retry alone: attempts %d, policy %+v", a.Attempts, a.Retry)
	}
	if b.Attempts != 3 || b.Retry.Attempts != 3 || b.Retry.InitialIntervalMs != 100 {
		t.Fatalf("attempts beside a policy without its own: attempts %d, policy %+v", b.Attempts, b.Retry)
	}
	if c.Attempts != 2 || c.Retry != nil {
		t.Fatalf("attempts alone must stay as they were: %+v", c)
	}
	out, _ := json.Marshal(c)
	if strings.Contains(string(out), "retry") {
		t.Fatalf("a component without a policy shows none: %s", out)
	}
}
