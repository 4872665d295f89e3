package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/web/httperr"
)

// toolFunc runs one tool for the authenticated caller on its raw JSON arguments and returns
// the value to answer with (marshalled to JSON) or an error for the model to read.
type toolFunc func(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error)

// mcpToolError is a tool failure whose message is meant for the caller as it is.
type mcpToolError struct{ msg string }

func (e *mcpToolError) Error() string { return e.msg }

func toolErrorf(format string, args ...any) error {
	return &mcpToolError{msg: fmt.Sprintf(format, args...)}
}

// JSON Schemas of the tools' arguments. They are written out rather than derived from Go
// types so that each property says what it means and what range it takes; the handlers check
// the arguments themselves (with messages naming the field), so a client that ignores the
// schemas gets the same answers as the REST API would give.
var (
	pageProperties = fmt.Sprintf(`"page":{"type":"integer","minimum":1,"maximum":%d,"default":1,"description":"page number, from 1"},
		"limit":{"type":"integer","minimum":1,"maximum":%d,"default":%d,"description":"items per page"}`,
		projections.MaxPage, MaxPageLimit, DefaultPageLimit)

	listModulesSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` + pageProperties + `}}`)

	executeComponentSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,
		"required":["module","input","config"],
		"properties":{
		"module":{"type":"string","minLength":1,"description":"name of the component module to run, as list_modules shows it (for example core.echo)"},
		"input":{"type":"object","description":"the component's inputs; must match the module's inputSchema ({} for none)"},
		"config":{"type":"object","description":"the component's configuration; must match the module's configSchema ({} for none)"},
		"attempts":{"type":"integer","minimum":%d,"maximum":%d,"default":1,"description":"how many times to try the module if it fails"},
		"waitForMs":{"type":"integer","minimum":0,"maximum":%d,"default":0,"description":"wait up to this many milliseconds for the result; 0 returns at once with status CREATED (then use get_execution)"}}}`,
		execution.MinAttempts, execution.MaxAttempts, execution.MaxWaitForMs))

	getExecutionSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["executionId"],
		"properties":{"executionId":{"type":"string","description":"the id execute_component returned"}}}`)

	noArgumentsSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`)
)

// executeArguments are the fields execute_component takes: the submit body of SPEC.md 4.1
// without the webhook fields, since an MCP client reads results from the call or by polling.
var executeArguments = map[string]bool{"module": true, "input": true, "config": true, "attempts": true, "waitForMs": true}

func boolPtr(b bool) *bool { return &b }

// addTools registers every tool on server.
func (m *MCP) addTools(server *mcp.Server) {
	m.tool(server, &mcp.Tool{Name: "list_modules", Title: "List component modules",
		Description: "Lists the component modules this service runs, with each module's description, cost in credits " +
			"per call, timeout, and the JSON Schemas its input and config must match. Paginated: " +
			"returns {data, total, page, totalPages}.",
		InputSchema: listModulesSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.listModules)
	m.tool(server, &mcp.Tool{Name: "execute_component", Title: "Execute a component",
		Description: "Runs one component module in the token's workspace, billed like an SDK call (a repeat of an identical " +
			"call within the cache window is free). Returns the execution record: id, module, status (CREATED, RUNNING, " +
			"COMPLETED, FAILED), completed, output, error, totalUsage (credits billed), createdAt, updatedAt. With " +
			"waitForMs it waits for the result; otherwise follow the id with get_execution.",
		InputSchema: executeComponentSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)},
	}, m.executeComponent)
	m.tool(server, &mcp.Tool{Name: "get_execution", Title: "Get a component execution",
		Description: "Returns the current execution record of a component execution of this workspace: status, output " +
			"once COMPLETED, error once FAILED, and the credits it used.",
		InputSchema: getExecutionSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.getExecution)
	m.tool(server, &mcp.Tool{Name: "get_balance", Title: "Get the credit balance",
		Description: "Returns the workspace's credit balance: credit (paid, never expires), usage (plan-included, resets " +
			"on each plan renewal) and total (what can be spent).",
		InputSchema: noArgumentsSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, m.getBalance)
	m.addWorkflowTools(server)
	m.addEventTools(server)
	m.addWaitTools(server)
	m.addScheduleTools(server)
}

// tool registers t with f behind the checks every tool shares.
func (m *MCP) tool(server *mcp.Server, t *mcp.Tool, f toolFunc) {
	server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller, ok := mcpCallerFrom(ctx)
		if !ok {
			// authenticate puts the caller in every request's context: a wiring fault.
			return nil, errors.New("unauthenticated tool call")
		}
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		// The arguments as sent: a decoded string would hide a lone surrogate.
		err := domain.CheckJSONBody("arguments", args)
		var out any
		if err == nil {
			out, err = f(ctx, caller, args)
		}
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(errors.New(m.toolMessage(ctx, t.Name, err)))
			return res, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode the result of %s: %w", t.Name, err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
	})
}

// toolMessage is what the model reads of a failed call: the message of the one error mapping
// (httperr.Rules) the REST API answers with, never internals (those are logged).
func (m *MCP) toolMessage(ctx context.Context, tool string, err error) string {
	var te *mcpToolError
	if errors.As(err, &te) {
		return te.msg
	}
	status, msg, ok := httperr.Classify(err)
	if !ok {
		LoggerFrom(ctx).WithError(err).WithField("tool", tool).Error("mcp tool failed")
		return msg
	}
	switch status {
	case http.StatusBadRequest:
		return "invalid arguments: " + msg
	case http.StatusPaymentRequired:
		return msg + ": the workspace's balance does not cover this call (see get_balance)"
	}
	return msg
}

// decodeArguments reads a tool's arguments into v, refusing unknown fields; absent arguments
// are an empty object.
func decodeArguments(args json.RawMessage, v any) error {
	if isNull(args) {
		args = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return domain.Invalid("arguments", "%s", err.Error())
	}
	return nil
}

// pageArguments reads the page and limit of a list tool, with the REST lists' rules
// (projections.NewPage).
func pageArguments(args json.RawMessage) (projections.Page, error) {
	a := struct {
		Page  int `json:"page"`
		Limit int `json:"limit"`
	}{Page: 1, Limit: DefaultPageLimit}
	if err := decodeArguments(args, &a); err != nil {
		return projections.Page{Page: 1, Limit: DefaultPageLimit}, err
	}
	return projections.NewPage(a.Page, a.Limit)
}

func (m *MCP) listModules(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	p, err := pageArguments(args)
	if err != nil {
		return nil, err
	}
	list, total, err := listModules(ctx, m.Registry, m.Queries, caller.WorkspaceID, p)
	if err != nil {
		return nil, err
	}
	return PageBody[ModuleInfo]{Data: list, Total: total, Page: p.Page, TotalPages: p.TotalPages(total)}, nil
}

func (m *MCP) executeComponent(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	if isNull(args) {
		args = json.RawMessage(`{}`)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		return nil, domain.Invalid("arguments", "must be a JSON object")
	}
	for name := range fields {
		if !executeArguments[name] {
			return nil, domain.Invalid(name, "is not an argument of execute_component")
		}
	}
	req, err := parseSubmit(args)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	cmd := req.command(Caller{WorkspaceID: caller.WorkspaceID})
	cmd.CacheWindow = m.CacheWindow
	st, err := m.Cmds.Executions.SubmitExecution(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return m.components().waitRest(ctx, st, cmd.WaitFor-time.Since(start)).Record(), nil
}

// components lends the SDK's waiting code, so both endpoints wait alike.
func (m *MCP) components() *SDKComponents { return &SDKComponents{Cmds: m.Cmds, Hub: m.Hub} }

func (m *MCP) getExecution(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	var a struct {
		ExecutionID string `json:"executionId"`
	}
	if err := decodeArguments(args, &a); err != nil {
		return nil, err
	}
	if a.ExecutionID == "" {
		return nil, domain.Invalid("executionId", "is required")
	}
	st, err := m.Cmds.Executions.Execution(ctx, a.ExecutionID)
	if err == nil && st.WorkspaceID != caller.WorkspaceID {
		// Another workspace's execution is answered as an unknown one.
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		return nil, toolErrorf("execution %s not found", a.ExecutionID)
	}
	if err != nil {
		return nil, err
	}
	return st.Record(), nil
}

func (m *MCP) getBalance(ctx context.Context, caller mcpCaller, args json.RawMessage) (any, error) {
	if err := decodeArguments(args, &struct{}{}); err != nil {
		return nil, err
	}
	b, err := m.Cmds.Billing.Balance(ctx, caller.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return projections.Balance{Credit: b.Credit, Usage: b.Usage, Total: b.Total()}, nil
}
