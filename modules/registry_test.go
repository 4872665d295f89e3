package modules

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func testModule(t *testing.T, d Definition) Module {
	t.Helper()
	m, err := NewModule(d)
	if err != nil {
		t.Fatalf("NewModule(%s): %v", d.Name, err)
	}
	return m
}

func obj(s string) json.RawMessage { return json.RawMessage(s) }

func TestRegistryRegisterGetList(t *testing.T) {
	r := New()
	run := func(ctx context.Context, c Call) (json.RawMessage, error) { return c.Input, nil }
	b := testModule(t, Definition{Name: "test.b", Description: "B", CostMilli: 2500, Run: run, Timeout: time.Second})
	a := testModule(t, Definition{Name: "test.a", Description: "A", CostMilli: 1000, Run: run})
	if err := r.Register(b); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(testModule(t, Definition{Name: "test.a", Run: run})); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if err := r.Register(nil); err == nil {
		t.Fatal("nil module accepted")
	}
	if m, ok := r.Get("test.a"); !ok || m != a {
		t.Fatalf("Get(test.a) = %v, %v", m, ok)
	}
	if _, ok := r.Get("test.zzz"); ok {
		t.Fatal("Get of unknown module succeeded")
	}
	list := r.List()
	if len(list) != 2 || list[0].Name != "test.a" || list[1].Name != "test.b" {
		t.Fatalf("List() = %+v", list)
	}
	if list[1].CostMilli != 2500 || list[1].Cost != 2.5 || list[1].TimeoutMs != 1000 || list[0].Timeout != DefaultTimeout {
		t.Fatalf("List()[1] = %+v", list[1])
	}
	if string(list[0].ConfigSchema) != `{"type":"object"}` {
		t.Fatalf("default config schema = %s", list[0].ConfigSchema)
	}
	b2, err := json.Marshal(list[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"test.b"`, `"costMilli":2500`, `"cost":2.5`, `"timeoutMs":1000`, `"configSchema":{"type":"object"}`} {
		if !strings.Contains(string(b2), want) {
			t.Errorf("Info JSON %s lacks %s", b2, want)
		}
	}
}

func TestNewModuleRejectsBadDefinitions(t *testing.T) {
	run := func(ctx context.Context, c Call) (json.RawMessage, error) { return nil, nil }
	for name, d := range map[string]Definition{
		"bad name":      {Name: "Bad Name", Run: run},
		"empty name":    {Name: "", Run: run},
		"no run":        {Name: "test.x"},
		"negative cost": {Name: "test.x", Run: run, CostMilli: -1},
		"bad schema":    {Name: "test.x", Run: run, ConfigSchema: obj(`{"type": 5}`)},
		"not json":      {Name: "test.x", Run: run, InputSchema: obj(`{`)},
		"remote ref":    {Name: "test.x", Run: run, ConfigSchema: obj(`{"$ref": "https://example.com/s.json"}`)},
	} {
		if _, err := NewModule(d); err == nil {
			t.Errorf("%s: NewModule accepted %+v", name, d)
		}
	}
}

func TestRegistryValidateUnknownModule(t *testing.T) {
	err := Builtins(BuiltinsConfig{}).Validate("no.such", obj(`{}`), obj(`{}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "module" || !errors.Is(err, ErrUnknownModule) {
		t.Fatalf("Validate(no.such) = %v", err)
	}
}

func TestRegistryRun(t *testing.T) {
	r := New()
	register := func(d Definition) {
		t.Helper()
		if err := r.Register(testModule(t, d)); err != nil {
			t.Fatal(err)
		}
	}
	register(Definition{Name: "test.panic", Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		var m map[string]int
		m["boom"]++ // nil map write
		return nil, nil
	}})
	register(Definition{Name: "test.block", Timeout: 20 * time.Millisecond, Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	register(Definition{Name: "test.plainerr", Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		return nil, errors.New("something broke")
	}})
	register(Definition{Name: "test.infra", Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		return nil, Infrastructure(errors.New("database down"))
	}})
	register(Definition{Name: "test.badjson", Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		return json.RawMessage(`{"a":`), nil
	}})
	register(Definition{Name: "test.nil", Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		return nil, nil
	}})
	register(Definition{Name: "test.attempt", Run: func(ctx context.Context, c Call) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"attempt": c.Attempt, "id": c.ExecutionID})
	}})
	register(Definition{
		Name:         "test.strict",
		ConfigSchema: obj(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`),
		Run:          func(ctx context.Context, c Call) (json.RawMessage, error) { return c.Config, nil },
	})

	call := Call{Config: obj(`{}`), Input: obj(`{}`), ExecutionID: "e1"}

	t.Run("panic is recovered", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.panic", call)
		f, ok := AsFailure(err)
		if !ok || f.Code != CodePanic || f.Stack == "" || !strings.Contains(f.Message, "test.panic") {
			t.Fatalf("err = %#v", err)
		}
		b, _ := json.Marshal(f)
		if strings.Contains(string(b), "goroutine") || !strings.Contains(string(b), `"code":"panic"`) {
			t.Fatalf("failure JSON = %s", b)
		}
	})
	t.Run("module timeout", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.block", call)
		if f, ok := AsFailure(err); !ok || f.Code != CodeTimeout {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("caller deadline is a timeout failure", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, err := r.Run(ctx, "test.block", call)
		if f, ok := AsFailure(err); !ok || f.Code != CodeTimeout {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("caller cancellation is an infrastructure error", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.Run(ctx, "test.attempt", call)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if _, ok := AsFailure(err); ok {
			t.Fatal("cancellation reported as a Failure")
		}
	})
	t.Run("plain error becomes module_error", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.plainerr", call)
		if f, ok := AsFailure(err); !ok || f.Code != CodeModuleError || f.Message != "something broke" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("infrastructure errors pass through", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.infra", call)
		if !errors.Is(err, ErrInfrastructure) || !strings.Contains(err.Error(), "database down") {
			t.Fatalf("err = %v", err)
		}
		if _, ok := AsFailure(err); ok {
			t.Fatal("infrastructure error reported as a Failure")
		}
	})
	t.Run("invalid output", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.badjson", call)
		if f, ok := AsFailure(err); !ok || f.Code != CodeInvalidOutput {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("nil output is null", func(t *testing.T) {
		out, err := r.Run(context.Background(), "test.nil", call)
		if err != nil || string(out) != "null" {
			t.Fatalf("out = %s, err = %v", out, err)
		}
	})
	t.Run("attempt defaults to 1 and the call is passed on", func(t *testing.T) {
		out, err := r.Run(context.Background(), "test.attempt", call)
		if err != nil || string(out) != `{"attempt":1,"id":"e1"}` {
			t.Fatalf("out = %s, err = %v", out, err)
		}
	})
	t.Run("unknown module", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.nope", call)
		if !errors.Is(err, ErrUnknownModule) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("invalid config is a failure naming the field", func(t *testing.T) {
		_, err := r.Run(context.Background(), "test.strict", Call{Config: obj(`{"n":"x"}`), Input: obj(`{}`)})
		f, ok := AsFailure(err)
		if !ok || f.Code != CodeInvalidRequest || !strings.Contains(f.Message, "config.n") {
			t.Fatalf("err = %v", err)
		}
		b, _ := json.Marshal(f)
		if !strings.Contains(string(b), `"details":{"field":"config.n"}`) {
			t.Fatalf("failure JSON = %s", b)
		}
	})
	t.Run("RunValidated trusts the caller's validation and runs the same way otherwise", func(t *testing.T) {
		out, err := r.RunValidated(context.Background(), "test.strict", Call{Config: obj(`{"n":"x"}`), Input: obj(`{}`)})
		if err != nil || string(out) != `{"n":"x"}` {
			t.Fatalf("RunValidated = %s, %v; want the config back without validation", out, err)
		}
		if _, err := r.RunValidated(context.Background(), "test.plainerr", call); !isCode(err, CodeModuleError) {
			t.Fatalf("RunValidated of a failing module = %v, want module_error", err)
		}
	})
}

func isCode(err error, code string) bool {
	f, ok := AsFailure(err)
	return ok && f.Code == code
}

func TestRunIsolatedRecoversPanics(t *testing.T) {
	_, err := runIsolated(context.Background(), "test.iso", func() (json.RawMessage, error) {
		panic("kaboom")
	})
	if f, ok := AsFailure(err); !ok || f.Code != CodePanic {
		t.Fatalf("err = %v", err)
	}
}

func TestRunIsolatedHonoursContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := runIsolated(ctx, "test.iso", func() (json.RawMessage, error) {
		<-release
		return nil, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestFailureJSON(t *testing.T) {
	b, err := json.Marshal(&Failure{Message: "nope", Code: "failed", Details: map[string]int{"n": 1}})
	if err != nil || string(b) != `{"message":"nope","code":"failed","details":{"n":1}}` {
		t.Fatalf("%s %v", b, err)
	}
	b, _ = json.Marshal(Fail("x", "a %d", 1))
	if string(b) != `{"message":"a 1","code":"x"}` {
		t.Fatalf("%s", b)
	}
}
