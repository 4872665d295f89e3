package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/mcptoken"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// HeaderMCPToken carries the credential of the MCP endpoint (SPEC.md 5).
const HeaderMCPToken = "X-Mcp-Token"

// What a refused MCP request is told; as for API keys, nothing says which part was wrong.
const (
	MsgMissingMCPToken = "missing MCP token (header " + HeaderMCPToken + ")"
	MsgInvalidMCPToken = "invalid MCP token"
	// MsgUnknownMCPTokens is the 429 of an address that sent too many unknown tokens.
	MsgUnknownMCPTokens = "too many unknown MCP tokens from this address"
)

// mcpServerVersion is the version the MCP server announces in its handshake.
const mcpServerVersion = "1.0.0"

// MCP serves the Model Context Protocol endpoint /v1/mcp over the streamable HTTP transport
// (docs/mcp.md). Every HTTP request is authenticated by its X-Mcp-Token, which acts on the
// token's one workspace, and is rate limited in the SDK endpoints' limiter under the token's
// id. Tool calls go through the same commands as the SDK endpoints, so the executor bills them
// as it bills SDK calls.
type MCP struct {
	Cmds     *commands.Commands
	Queries  *projections.Queries
	Registry *modules.Registry
	// Hub answers waitForMs; it must carry the execution and run categories.
	Hub *livehub.Hub
	// RateLimit spends cost tokens of a bucket named by key, answering 429 itself when it
	// refuses (SDKAuth.Limit); nil disables rate limiting.
	RateLimit func(w http.ResponseWriter, key string, cost int) bool
	// ThrottleUnknown puts each token lookup under the per-address throttle of unknown
	// credentials (SDKAuth.ThrottleUnknown), so random well-formed tokens cannot each cost a
	// store read; nil disables it.
	ThrottleUnknown func(w http.ResponseWriter, r *http.Request, id, refusal string) (settle func(found bool), ok bool)
	// CacheWindow is SWITCHYARD_CACHE_WINDOW, as for SDK submits.
	CacheWindow time.Duration
	// Now is the clock tokens expire by (time.Now).
	Now func() time.Time
	// Logger receives failures when the request carries no logger of its own.
	Logger logrus.FieldLogger
}

// Mount adds /v1/mcp to the /v1 router.
func (m *MCP) Mount(v1 *mux.Router) {
	if m.Now == nil {
		m.Now = time.Now
	}
	m.Logger = logger(m.Logger)
	server := mcp.NewServer(&mcp.Implementation{Name: "switchyard", Title: "Switchyard", Version: mcpServerVersion},
		&mcp.ServerOptions{
			Instructions: mcpInstructions,
			// No logging capability: nothing is streamed to clients but tool results.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			Logger:       slog.New(slog.DiscardHandler),
		})
	m.addTools(server)
	transport := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		// Stateless: no session lives in one process's memory, so any serve process behind a
		// load balancer answers any request, and each request is authenticated on its own.
		Stateless: true,
		// One JSON answer per request: no tool streams progress, and plain JSON passes every
		// proxy.
		JSONResponse: true,
		// The DNS-rebinding guard protects unauthenticated servers on a developer's machine; this
		// endpoint needs a secret token, and the guard would refuse every request that a
		// reverse proxy on the same host forwards with the public Host header.
		DisableLocalhostProtection:   true,
		PropagateRequestCancellation: true,
	})
	v1.Handle("/mcp", m.authenticate(transport)).Methods(http.MethodPost, http.MethodGet, http.MethodDelete)
}

// mcpInstructions tell a connecting model what the server is for.
const mcpInstructions = "Switchyard runs automation components and workflows in one workspace (the workspace of the " +
	"MCP token). Use list_modules to see the component modules and their input and config schemas, " +
	"execute_component to run one (set waitForMs to get the result inline), and get_execution to follow it. " +
	"list_workflows shows the workspace's workflows; trigger_workflow runs one, get_run follows a run and " +
	"cancel_run stops it; signal_run sends a signal to a run's waiting stages, send_event sends an event to the " +
	"workflows listening for it, and list_schedules, pause_schedule, resume_schedule and trigger_schedule manage " +
	"a workflow's ON_SCHEDULE components. Executions and run stages cost credits: get_balance shows what is left."

// mcpCaller is the authenticated token of an MCP request.
type mcpCaller struct {
	TokenID, WorkspaceID string
}

type mcpCallerKey struct{}

func mcpCallerFrom(ctx context.Context) (mcpCaller, bool) {
	c, ok := ctx.Value(mcpCallerKey{}).(mcpCaller)
	return c, ok
}

// authenticate checks X-Mcp-Token, rate-limits the request by the tools it calls, and hands it
// to the MCP transport with the caller in its context.
func (m *MCP) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request's logger (with its request id) when the server chain set one.
		if _, ok := r.Context().Value(loggerKey{}).(logrus.FieldLogger); !ok {
			r = r.WithContext(WithLogger(r.Context(), m.Logger))
		}
		caller, ok := m.token(w, r)
		if !ok {
			return
		}
		body, err := readBody(r)
		if err != nil {
			writeBodyError(w, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if m.RateLimit != nil && !m.RateLimit(w, "mcp:"+caller.TokenID, mcpCost(body)) {
			return
		}
		ctx := context.WithValue(r.Context(), mcpCallerKey{}, caller)
		ctx = WithLogger(ctx, LoggerFrom(ctx).WithFields(logrus.Fields{"workspaceId": caller.WorkspaceID, "mcpTokenId": caller.TokenID}))
		ctx = commands.WithMetadata(ctx, commands.Metadata{Source: "mcp:" + caller.TokenID, RequestID: w.Header().Get("X-Request-Id")})
		ew := &mcpErrorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r.WithContext(ctx))
		ew.finish()
	})
}

// token authenticates X-Mcp-Token; on failure it has answered 401 (429 when the caller's
// address sent too many unknown tokens, 503 when the store is unreachable). The token's stream is
// folded on every request (only the events after the handler's cached state are read), so a
// revocation or expiry takes effect on the very next request, on every instance.
func (m *MCP) token(w http.ResponseWriter, r *http.Request) (mcpCaller, bool) {
	raw := r.Header.Get(HeaderMCPToken)
	if raw == "" {
		WriteError(w, http.StatusUnauthorized, MsgMissingMCPToken)
		return mcpCaller{}, false
	}
	id, err := mcptoken.ParseID(raw)
	if err != nil {
		WriteError(w, http.StatusUnauthorized, MsgInvalidMCPToken)
		return mcpCaller{}, false
	}
	settle := func(bool) {}
	if m.ThrottleUnknown != nil {
		var ok bool
		if settle, ok = m.ThrottleUnknown(w, r, "mcp:"+id, MsgUnknownMCPTokens); !ok {
			return mcpCaller{}, false
		}
	}
	st, err := m.Cmds.Workspaces.MCPToken(r.Context(), id)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		WriteDomainError(w, r, fmt.Errorf("mcp auth: token lookup: %w", err))
		return mcpCaller{}, false
	}
	settle(err == nil)
	// Compared whether or not the token was found, in constant time, so timing tells nothing
	// about which tokens exist or how much of a hash matched.
	hashOK := subtle.ConstantTimeCompare([]byte(mcptoken.Hash(raw)), []byte(st.Hash)) == 1
	if !hashOK || !st.Usable(m.Now()) {
		WriteError(w, http.StatusUnauthorized, MsgInvalidMCPToken)
		return mcpCaller{}, false
	}
	return mcpCaller{TokenID: st.ID, WorkspaceID: st.WorkspaceID}, true
}

// mcpToolCost is the rate-limit cost of a tool call: running a component costs 2, as the SDK
// submit does (SPEC.md 4.1), every other call 1.
var mcpToolCost = map[string]int{"execute_component": submitCost}

// mcpCost is the rate-limit cost of one HTTP request: the sum of the costs of the tool calls in
// it (a JSON-RPC batch may hold several), and at least 1, so that the protocol's own messages
// (initialize, tools/list, ...) cannot flood the server either. A body that is not JSON-RPC
// costs 1; the transport answers it 400.
func mcpCost(body []byte) int {
	type message struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	var msgs []message
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		_ = json.Unmarshal(trimmed, &msgs)
	} else {
		var one message
		if json.Unmarshal(trimmed, &one) == nil {
			msgs = []message{one}
		}
	}
	cost := 0
	for _, msg := range msgs {
		if msg.Method != "tools/call" {
			continue
		}
		if c, ok := mcpToolCost[msg.Params.Name]; ok {
			cost += c
		} else {
			cost++
		}
	}
	return max(cost, 1)
}

// mcpErrorWriter gives the transport's plain-text HTTP errors (a wrong method, content type or
// Accept header) the SPEC.md 7 body every /v1 error has. JSON answers, JSON-RPC errors
// included, pass untouched: MCP clients read those.
type mcpErrorWriter struct {
	http.ResponseWriter
	status int
	text   bytes.Buffer
}

// maxErrorText bounds the text kept of a rewritten error.
const maxErrorText = 1024

func (w *mcpErrorWriter) WriteHeader(code int) {
	if code >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *mcpErrorWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		if room := maxErrorText - w.text.Len(); room > 0 {
			w.text.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets the transport stream through the writer.
func (w *mcpErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *mcpErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *mcpErrorWriter) finish() {
	if w.status == 0 {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	if msg == "" {
		msg = http.StatusText(w.status)
	}
	WriteError(w.ResponseWriter, w.status, msg)
}
