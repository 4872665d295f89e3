package httpapi

import (
	"context"
	"encoding/json"

	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
)

// ModuleInfo is an entry of the module listing (GET /v1/sdk/modules, MCP list_modules): a
// built-in, or one of the caller's workspace's own modules (Transport set).
type ModuleInfo struct {
	modules.Info
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Cacheable says identical calls may be served from the cache window: every built-in,
	// and the workspace modules that say so.
	Cacheable bool `json:"cacheable"`
	// Transport is a workspace module's ("worker" or "http"); empty for a built-in.
	Transport string `json:"transport,omitempty"`
}

// listModules is one page of the built-ins (first, by name) and the workspace's own modules
// (by name), and the total.
func listModules(ctx context.Context, registry *modules.Registry, queries *projections.Queries, workspaceID string, p projections.Page) ([]ModuleInfo, int, error) {
	builtins := registry.List()
	out := []ModuleInfo{}
	for _, b := range PageOf(builtins, p) {
		out = append(out, ModuleInfo{Info: b, Cacheable: true})
	}
	if queries == nil { // a router without read models (some tests): the built-ins alone
		return out, len(builtins), nil
	}
	// The workspace's modules follow the built-ins: the page's remaining room, from where the
	// page starts past them.
	offset := max(p.Offset()-len(builtins), 0)
	own, total, err := queries.ModulesFrom(ctx, workspaceID, offset, p.Limit-len(out))
	if err != nil {
		return nil, 0, err
	}
	for _, m := range own {
		out = append(out, ModuleInfo{Info: modules.Info{Name: m.Name, Description: m.Description, CostMilli: int64(m.Price),
			Cost: m.Price.Float(), ConfigSchema: orObject(m.ConfigSchema), InputSchema: orObject(m.InputSchema), TimeoutMs: m.TimeoutMs},
			OutputSchema: m.OutputSchema, Cacheable: m.Cacheable, Transport: m.Transport.Type})
	}
	return out, len(builtins) + total, nil
}

// orObject is a schema as a built-in's would read: {"type": "object"} when none was given.
func orObject(doc json.RawMessage) json.RawMessage {
	if len(doc) == 0 || string(doc) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return doc
}
