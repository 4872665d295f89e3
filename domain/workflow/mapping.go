package workflow

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Lookup finds the value at path in a JSON document: dot-separated object keys and array
// indexes ("body.items.0.name"); "" or "." is the whole document. A path that leads nowhere
// gives null and false.
func Lookup(doc json.RawMessage, path string) (json.RawMessage, bool) {
	path = strings.TrimSpace(path)
	if path == "" || path == "." {
		return doc, true
	}
	cur := doc
	for _, part := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err == nil && obj != nil {
			v, ok := obj[part]
			if !ok {
				return json.RawMessage("null"), false
			}
			cur = v
			continue
		}
		var arr []json.RawMessage
		i, err := strconv.Atoi(part)
		if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
			return json.RawMessage("null"), false
		}
		cur = arr[i]
	}
	return cur, true
}

// Upstream is an incoming edge with the output of the stage it comes from.
type Upstream struct {
	Edge   Edge
	Output json.RawMessage
}

// BuildInput makes a stage's input object from its upstream outputs, edge by edge in
// definition order (later edges win on a shared key). See Edge.
func BuildInput(ups []Upstream) json.RawMessage {
	in := map[string]json.RawMessage{}
	for _, u := range ups {
		out := u.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		if len(u.Edge.Mapping) > 0 {
			for key, path := range u.Edge.Mapping {
				in[key], _ = Lookup(out, path)
			}
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err == nil && obj != nil {
			for k, v := range obj {
				in[k] = v
			}
			continue
		}
		in[u.Edge.From] = out
	}
	b, _ := json.Marshal(in) // a map of raw JSON values always encodes
	return b
}

// MergeConfig applies a partial config to a component's config (SPEC.md 4.8): top-level keys
// of patch replace those of base, and a key set to null is removed.
func MergeConfig(base, patch json.RawMessage) (json.RawMessage, error) {
	merged := map[string]json.RawMessage{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &merged); err != nil {
			return nil, err
		}
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	for k, v := range p {
		if string(v) == "null" {
			delete(merged, k)
			continue
		}
		merged[k] = v
	}
	return json.Marshal(merged)
}
