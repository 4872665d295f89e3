package modules

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestBuiltinsList(t *testing.T) {
	want := map[string]int64{
		"core.delay":    1000,
		"core.echo":     1000,
		"core.fail":     1000,
		"expr.eval":     1500,
		"http.request":  5000,
		"json.jq":       1500,
		"text.template": 1500,
	}
	list := Builtins(BuiltinsConfig{}).List()
	if len(list) != len(want) {
		t.Fatalf("got %d modules, want %d", len(list), len(want))
	}
	for i, info := range list {
		if i > 0 && list[i-1].Name >= info.Name {
			t.Errorf("List not sorted at %s", info.Name)
		}
		cost, ok := want[info.Name]
		if !ok {
			t.Errorf("unexpected module %s", info.Name)
			continue
		}
		if info.CostMilli != cost || info.Cost != float64(cost)/1000 {
			t.Errorf("%s cost = %d (%v)", info.Name, info.CostMilli, info.Cost)
		}
		if info.Description == "" || info.Timeout <= 0 || !json.Valid(info.ConfigSchema) || !json.Valid(info.InputSchema) {
			t.Errorf("%s: incomplete info %+v", info.Name, info)
		}
	}
}

func TestBuiltinsValidate(t *testing.T) {
	r := Builtins(BuiltinsConfig{})
	tests := []struct {
		module, config, input string
		field                 string // "" means valid
	}{
		// core.echo
		{"core.echo", `{}`, `{"a": 1}`, ""},
		{"core.echo", `{"x": 1}`, `{}`, "config.x"},
		{"core.echo", ``, `{}`, "config"},
		{"core.echo", `[]`, `{}`, "config"},
		{"core.echo", `{}`, ``, "input"},
		{"core.echo", `{}`, `5`, "input"},
		{"core.echo", `{}`, `{"a":`, "input"},
		{"core.echo", `{} {}`, `{}`, "config"},
		// core.delay
		{"core.delay", `{"ms": 0}`, `{}`, ""},
		{"core.delay", `{"ms": 10000}`, `{}`, ""},
		{"core.delay", `{}`, `{}`, "config.ms"},
		{"core.delay", `{"ms": -1}`, `{}`, "config.ms"},
		{"core.delay", `{"ms": 10001}`, `{}`, "config.ms"},
		{"core.delay", `{"ms": "5"}`, `{}`, "config.ms"},
		{"core.delay", `{"ms": 1.5}`, `{}`, "config.ms"},
		// core.fail
		{"core.fail", `{}`, `{}`, ""},
		{"core.fail", `{"message": "boom", "code": "E42", "details": {"a": [1]}, "succeedOnAttempt": 2}`, `{}`, ""},
		{"core.fail", `{"message": ""}`, `{}`, "config.message"},
		{"core.fail", `{"code": "bad code"}`, `{}`, "config.code"},
		{"core.fail", `{"succeedOnAttempt": 0}`, `{}`, "config.succeedOnAttempt"},
		{"core.fail", `{"succeedOnAttempt": "2"}`, `{}`, "config.succeedOnAttempt"},
		// json.jq
		{"json.jq", `{"query": ".items | map(.price) | add"}`, `{}`, ""},
		{"json.jq", `{"query": ".", "all": true}`, `{}`, ""},
		{"json.jq", `{}`, `{}`, "config.query"},
		{"json.jq", `{"query": ""}`, `{}`, "config.query"},
		{"json.jq", `{"query": ".a |"}`, `{}`, "config.query"},
		{"json.jq", `{"query": "{"}`, `{}`, "config.query"},
		{"json.jq", `{"query": "nosuchfn(1)"}`, `{}`, "config.query"},
		{"json.jq", `{"query": "input"}`, `{}`, "config.query"},
		{"json.jq", `{"query": "import \"x\" as x; ."}`, `{}`, "config.query"},
		{"json.jq", `{"query": ".", "all": "yes"}`, `{}`, "config.all"},
		// text.template
		{"text.template", `{"template": "Hello {{.name}}"}`, `{}`, ""},
		{"text.template", `{"template": "{{range .items}}{{.}}{{end}}", "strict": true}`, `{}`, ""},
		{"text.template", `{}`, `{}`, "config.template"},
		{"text.template", `{"template": "{{.name"}`, `{}`, "config.template"},
		{"text.template", `{"template": "{{nosuchfunc .}}"}`, `{}`, "config.template"},
		{"text.template", `{"template": "{{range 1000000000}}{{end}}"}`, `{}`, "config.template"},
		{"text.template", `{"template": "{{if .a}}{{range $i := 5}}{{end}}{{end}}"}`, `{}`, "config.template"},
		{"text.template", `{"template": "x", "strict": 1}`, `{}`, "config.strict"},
		// expr.eval
		{"expr.eval", `{"expression": "price * quantity > 100"}`, `{}`, ""},
		{"expr.eval", `{"expression": "a +"}`, `{}`, "config.expression"},
		{"expr.eval", `{"expression": "(("}`, `{}`, "config.expression"},
		{"expr.eval", `{"expression": ""}`, `{}`, "config.expression"},
		{"expr.eval", `{}`, `{}`, "config.expression"},
		{"expr.eval", `{"expression": "1", "vars": {}}`, `{}`, "config.vars"},
		// http.request
		{"http.request", `{"url": "https://example.com/a?b=c"}`, `{}`, ""},
		{"http.request", `{"method": "POST", "url": "http://example.com", "headers": {"X-Token": "t"}, "body": {"a": 1}, "timeoutMs": 30000}`, `{}`, ""},
		{"http.request", `{}`, `{"url": "https://example.com"}`, ""},
		{"http.request", `{}`, `{}`, "config.url"},
		{"http.request", `{"url": "ftp://example.com"}`, `{}`, "config.url"},
		{"http.request", `{"url": "http://"}`, `{}`, "config.url"},
		{"http.request", `{"url": "http://exa mple.com"}`, `{}`, "config.url"},
		{"http.request", `{}`, `{"url": "file:///etc/passwd"}`, "input.url"},
		{"http.request", `{}`, `{"url": 5}`, "input.url"},
		{"http.request", `{"url": "http://127.0.0.1/"}`, `{}`, "config.url"},
		{"http.request", `{"url": "http://10.0.0.1/"}`, `{}`, "config.url"},
		{"http.request", `{"url": "http://169.254.169.254/latest/meta-data/"}`, `{}`, "config.url"},
		{"http.request", `{}`, `{"url": "http://[::1]:8080/"}`, "input.url"},
		{"http.request", `{"url": "http://[::ffff:192.168.0.1]/"}`, `{}`, "config.url"},
		{"http.request", `{"url": "https://example.com", "method": "TRACE"}`, `{}`, "config.method"},
		{"http.request", `{"url": "https://example.com", "timeoutMs": 30001}`, `{}`, "config.timeoutMs"},
		{"http.request", `{"url": "https://example.com", "timeoutMs": 0}`, `{}`, "config.timeoutMs"},
		{"http.request", `{"url": "https://example.com", "maxResponseBytes": 1048577}`, `{}`, "config.maxResponseBytes"},
		{"http.request", `{"url": "https://example.com", "headers": {"X-N": 1}}`, `{}`, "config.headers.X-N"},
		{"http.request", `{"url": "https://example.com", "headers": {"Bad Header": "x"}}`, `{}`, "config.headers.Bad Header"},
		{"http.request", `{"url": "https://example.com", "headers": {"host": "x"}}`, `{}`, "config.headers.host"},
		{"http.request", `{"url": "https://example.com", "headers": {"X-A": "a\r\nX-B: b"}}`, `{}`, "config.headers.X-A"},
		{"http.request", `{"url": "https://example.com"}`, `{"headers": {"Transfer-Encoding": "chunked"}}`, "input.headers.Transfer-Encoding"},
		{"http.request", `{"url": "https://example.com", "extra": true}`, `{}`, "config.extra"},
	}
	for _, tt := range tests {
		err := r.Validate(tt.module, json.RawMessage(tt.config), json.RawMessage(tt.input))
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s %s %s: unexpected error %v", tt.module, tt.config, tt.input, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s %s %s: err = %v, want a ValidationError on %s", tt.module, tt.config, tt.input, err, tt.field)
			continue
		}
		if ve.Field != tt.field || ve.Message == "" {
			t.Errorf("%s %s %s: field %q (%s), want %q", tt.module, tt.config, tt.input, ve.Field, ve.Message, tt.field)
		}
	}
}

func TestValidationMessages(t *testing.T) {
	r := Builtins(BuiltinsConfig{})
	for _, tt := range []struct{ module, config, want string }{
		{"core.delay", `{}`, "config.ms: is required"},
		{"core.delay", `{"ms": "5"}`, "config.ms: must be an integer, got string"},
		{"core.delay", `{"ms": 10001}`, "config.ms: must be at most 10000"},
		{"core.echo", `{"x": 1}`, "config.x: is not a known field"},
		{"http.request", `{"method": "TRACE", "url": "https://example.com"}`, `config.method: must be one of "GET", "HEAD"`},
		{"json.jq", `{"query": ".a |"}`, "config.query: jq syntax error at offset 4: unexpected EOF"},
	} {
		err := r.Validate(tt.module, json.RawMessage(tt.config), json.RawMessage(`{}`))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s %s: %v, want prefix %q", tt.module, tt.config, err, tt.want)
		}
	}
}

// runBuiltin runs a built-in through the registry and returns the decoded
// output or the Failure.
func runBuiltin(t *testing.T, r *Registry, module, config, input string, attempt int) (any, *Failure) {
	t.Helper()
	out, err := r.Run(context.Background(), module, Call{
		Config: json.RawMessage(config), Input: json.RawMessage(input), Attempt: attempt, ExecutionID: "exec-1",
	})
	if err != nil {
		f, ok := AsFailure(err)
		if !ok {
			t.Fatalf("%s: infrastructure error %v", module, err)
		}
		return nil, f
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s: output %s: %v", module, out, err)
	}
	return v, nil
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestBuiltinsRun(t *testing.T) {
	r := Builtins(BuiltinsConfig{})
	bigItems := `{"big": "` + strings.Repeat("x", 100<<10) + `", "items": [` + strings.TrimSuffix(strings.Repeat("1,", 20), ",") + `]}`
	tests := []struct {
		name, module, config, input string
		attempt                     int
		want                        string // expected output JSON, when wantCode is ""
		wantCode                    string
		wantMessage                 string // substring of the failure message
	}{
		{"echo returns the input", "core.echo", `{}`, `{"a": [1, 2, {"b": null}], "s": "x"}`, 1, `{"a": [1, 2, {"b": null}], "s": "x"}`, "", ""},
		{"delay 0 returns the input", "core.delay", `{"ms": 0}`, `{"k": "v"}`, 1, `{"k": "v"}`, "", ""},
		{"delay 1ms returns the input", "core.delay", `{"ms": 1}`, `{"k": "v"}`, 1, `{"k": "v"}`, "", ""},

		{"fail defaults", "core.fail", `{}`, `{}`, 1, "", "failed", "failed"},
		{"fail custom", "core.fail", `{"message": "card declined", "code": "E42"}`, `{}`, 3, "", "E42", "card declined"},
		{"fail before succeedOnAttempt", "core.fail", `{"succeedOnAttempt": 2}`, `{"ok": true}`, 1, "", "failed", "failed"},
		{"succeed on attempt", "core.fail", `{"succeedOnAttempt": 2}`, `{"ok": true}`, 2, `{"ok": true}`, "", ""},
		{"succeed after attempt", "core.fail", `{"succeedOnAttempt": 2}`, `{"ok": true}`, 3, `{"ok": true}`, "", ""},
		{"attempt 0 counts as 1", "core.fail", `{"succeedOnAttempt": 1}`, `{"ok": true}`, 0, `{"ok": true}`, "", ""},

		{"jq single", "json.jq", `{"query": ".items | map(.price) | add"}`, `{"items": [{"price": 2}, {"price": 3.5}]}`, 1, `5.5`, "", ""},
		{"jq many", "json.jq", `{"query": ".items[].id"}`, `{"items": [{"id": "a"}, {"id": "b"}]}`, 1, `["a", "b"]`, "", ""},
		{"jq none", "json.jq", `{"query": "empty"}`, `{}`, 1, `null`, "", ""},
		{"jq all single", "json.jq", `{"query": ".a", "all": true}`, `{"a": 1}`, 1, `[1]`, "", ""},
		{"jq all none", "json.jq", `{"query": "empty", "all": true}`, `{}`, 1, `[]`, "", ""},
		{"jq object", "json.jq", `{"query": "{n: (.xs | length), big: .big}"}`, `{"xs": [1, 2, 3], "big": 12345678901234}`, 1, `{"n": 3, "big": 12345678901234}`, "", ""},
		{"jq env is empty", "json.jq", `{"query": "$ENV | length"}`, `{}`, 1, `0`, "", ""},
		{"jq runtime error", "json.jq", `{"query": ".a | error(\"boom\")"}`, `{"a": 1}`, 1, "", CodeEvaluation, "boom"},
		{"jq type error", "json.jq", `{"query": ".a + 1"}`, `{"a": "x"}`, 1, "", CodeEvaluation, "cannot add"},
		{"jq too many results", "json.jq", `{"query": "range(20000)"}`, `{}`, 1, "", CodeOutputTooLarge, "results"},
		{"jq output too large", "json.jq", `{"query": "[range(200000) | \"xxxxxxxxxx\"]"}`, `{}`, 1, "", CodeOutputTooLarge, "bytes"},

		{"template", "text.template", `{"template": "Hello {{.name}}! {{len .items}} items: {{join \", \" .items}}"}`, `{"name": "Ada", "items": ["a", "b"]}`, 1, `{"text": "Hello Ada! 2 items: a, b"}`, "", ""},
		{"template funcs", "text.template", `{"template": "{{upper .s}} {{json .o}} {{default \"none\" .missing}} {{if eq .n 3.0}}three{{end}}"}`, `{"s": "hi", "o": {"k": [1]}, "n": 3}`, 1, `{"text": "HI {\"k\":[1]} none three"}`, "", ""},
		{"template split and join", "text.template", `{"template": "{{join \"+\" (split \",\" .csv)}}"}`, `{"csv": "a,b,c"}`, 1, `{"text": "a+b+c"}`, "", ""},
		{"template missing key", "text.template", `{"template": "{{.nope}}"}`, `{}`, 1, `{"text": "<no value>"}`, "", ""},
		{"template strict missing key", "text.template", `{"template": "{{.nope}}", "strict": true}`, `{}`, 1, "", CodeEvaluation, "nope"},
		{"template runtime error", "text.template", `{"template": "{{index .a 5}}"}`, `{"a": [1]}`, 1, "", CodeEvaluation, "index"},
		{"template output too large", "text.template", `{"template": "{{range .items}}{{$.big}}{{end}}"}`, bigItems, 1, "", CodeOutputTooLarge, "bytes"},
		{"template range over number input refused", "text.template", `{"template": "{{range .n}}x{{end}}"}`, `{"n": 1e15}`, 1, "", CodeEvaluation, "range"},

		{"expr arithmetic", "expr.eval", `{"expression": "price * quantity"}`, `{"price": 3, "quantity": 10}`, 1, `{"result": 30}`, "", ""},
		{"expr bool", "expr.eval", `{"expression": "price * quantity > 100 && name startsWith \"A\""}`, `{"price": 3, "quantity": 100, "name": "Ada"}`, 1, `{"result": true}`, "", ""},
		{"expr collections", "expr.eval", `{"expression": "map(filter(items, .price > 1), .id)"}`, `{"items": [{"id": "a", "price": 1}, {"id": "b", "price": 2.5}]}`, 1, `{"result": ["b"]}`, "", ""},
		{"expr missing variable is nil", "expr.eval", `{"expression": "missing ?? \"default\""}`, `{}`, 1, `{"result": "default"}`, "", ""},
		{"expr runtime error", "expr.eval", `{"expression": "items[5]"}`, `{"items": [1]}`, 1, "", CodeEvaluation, "index out of range"},
		{"expr infinity", "expr.eval", `{"expression": "1 / zero"}`, `{"zero": 0}`, 1, "", CodeEvaluation, "not representable"},
		{"expr memory budget", "expr.eval", `{"expression": "len(map(1..100000000, # * 2))"}`, `{}`, 1, "", CodeEvaluation, "memory budget"},

		{"invalid config at run", "json.jq", `{"query": ".a |"}`, `{}`, 1, "", CodeInvalidRequest, "config.query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, f := runBuiltin(t, r, tt.module, tt.config, tt.input, tt.attempt)
			if tt.wantCode != "" {
				if f == nil {
					t.Fatalf("output %v, want failure %s", got, tt.wantCode)
				}
				if f.Code != tt.wantCode || !strings.Contains(f.Message, tt.wantMessage) {
					t.Fatalf("failure %s %q, want %s containing %q", f.Code, f.Message, tt.wantCode, tt.wantMessage)
				}
				return
			}
			if f != nil {
				t.Fatalf("failure %s: %s", f.Code, f.Message)
			}
			if want := jsonValue(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Fatalf("output %v, want %v", got, want)
			}
		})
	}
}

func TestFailDetails(t *testing.T) {
	_, f := runBuiltin(t, Builtins(BuiltinsConfig{}), "core.fail", `{"message": "m", "details": {"a": [1]}}`, `{}`, 1)
	b, err := json.Marshal(f)
	if err != nil || string(b) != `{"message":"m","code":"failed","details":{"a":[1]}}` {
		t.Fatalf("%s %v", b, err)
	}
}

func TestDelayHonoursContext(t *testing.T) {
	r := Builtins(BuiltinsConfig{})
	call := Call{Config: json.RawMessage(`{"ms": 10000}`), Input: json.RawMessage(`{}`), Attempt: 1}

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.Run(ctx, "core.delay", call)
		if f, ok := AsFailure(err); !ok || f.Code != CodeTimeout {
			t.Fatalf("err = %v, want a timeout failure", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("core.delay ignored the deadline")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		m, _ := r.Get("core.delay")
		done := make(chan error, 1)
		go func() {
			_, err := m.Run(ctx, call)
			done <- err
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestJQHonoursDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := Builtins(BuiltinsConfig{}).Run(ctx, "json.jq", Call{
		Config: json.RawMessage(`{"query": "last(range(1e15))"}`), Input: json.RawMessage(`{}`),
	})
	if f, ok := AsFailure(err); !ok || f.Code != CodeTimeout {
		t.Fatalf("err = %v, want a timeout failure", err)
	}
}

func TestTemplateHonoursDeadline(t *testing.T) {
	// Nested ranges over input arrays: 200^3 iterations with an empty
	// body never hit the output writer, so only runIsolated stops it.
	items := "[" + strings.TrimSuffix(strings.Repeat("0,", 200), ",") + "]"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := Builtins(BuiltinsConfig{}).Run(ctx, "text.template", Call{
		Config: json.RawMessage(`{"template": "{{range .a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}"}`),
		Input:  json.RawMessage(`{"a": ` + items + `}`),
	})
	if f, ok := AsFailure(err); !ok || f.Code != CodeTimeout {
		t.Fatalf("err = %v, want a timeout failure", err)
	}
}
