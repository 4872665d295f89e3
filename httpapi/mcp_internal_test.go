package httpapi

import "testing"

func TestMCPCost(t *testing.T) {
	cases := []struct {
		name string
		body string
		want int
	}{
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 1},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 1},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 1},
		{"a cheap tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_balance"}}`, 1},
		{"execute_component costs as a submit", ` {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_component","arguments":{}}}`, 2},
		{"an unknown tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}`, 1},
		{"a batch adds up", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_component"}},
			{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_component"}},
			{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_execution"}},
			{"jsonrpc":"2.0","id":4,"method":"ping"}]`, 5},
		{"an empty batch", `[]`, 1},
		{"not JSON", `{"jsonrpc":`, 1},
		{"no body", ``, 1},
	}
	for _, c := range cases {
		if got := mcpCost([]byte(c.body)); got != c.want {
			t.Errorf("%s: cost %d, want %d", c.name, got, c.want)
		}
	}
}
