package httpapi_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/mcptoken"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/testenv"
)

// countingStore counts the stream reads made through it.
type countingStore struct {
	eventstore.Store
	reads atomic.Int64
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.RecordedEvent, error) {
	s.reads.Add(1)
	return s.Store.ReadStream(ctx, stream, from, max)
}

func randomMCPToken(t *testing.T) string {
	t.Helper()
	random := make([]byte, mcptoken.RandomBytes)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	return mcptoken.Format(uuid.New(), random)
}

// Random well-formed MCP tokens are throttled per address like unknown API keys: 200 of them
// cost at most the burst's store reads, the rest are answered 429 with Retry-After and no read,
// and a real token still works from the throttled address.
func TestUnknownMCPTokensAreThrottledPerAddress(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 10)
	store := &countingStore{Store: env.Store}
	cmds := commands.New(store)
	minted, err := cmds.Workspaces.MintMCPToken(context.Background(), commands.MintMCPToken{WorkspaceID: ws, Label: "real"})
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey),
		UnknownKeyRate: 0.001, UnknownKeyBurst: 10, Logger: log})
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.MCP{Cmds: cmds, Queries: env.Queries, RateLimit: auth.Limit, ThrottleUnknown: auth.ThrottleUnknown,
		Logger: log}).Mount(server.V1)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	call := func(token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/mcp", strings.NewReader(toolCall(1, "get_balance", "{}")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(httpapi.HeaderMCPToken, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// The real token is found once: from then on it skips its address's throttle.
	if resp := call(minted.Token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the real token: %d", resp.StatusCode)
	}

	before := store.reads.Load()
	throttled := 0
	for range 200 {
		switch resp := call(randomMCPToken(t)); resp.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			throttled++
		default:
			t.Fatalf("a random token: %d", resp.StatusCode)
		}
	}
	if n := store.reads.Load() - before; n > 10 {
		t.Fatalf("200 random tokens from one address cost %d store reads, want at most the burst of 10", n)
	}
	if throttled < 190 {
		t.Fatalf("only %d of 200 random tokens were throttled", throttled)
	}
	if resp := call(minted.Token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the real token while its address is throttled: %d", resp.StatusCode)
	}
}
