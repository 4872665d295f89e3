package commands_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/apikeys"
	"github.com/switchyard/switchyard/internal/testdb"
)

func newAPIKeyTestHandler(t *testing.T, now func() time.Time) (*commands.Commands, eventstore.Store) {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return commands.New(store, commands.WithClock(now)), store
}

func newAPIKeyTestWorkspace(t *testing.T, h *commands.Commands) string {
	t.Helper()
	ctx := context.Background()
	email := "owner-" + uuid.NewString()[:8] + "@example.com"
	if _, err := h.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123"}); err != nil {
		t.Fatal(err)
	}
	ws, err := h.Workspaces.CreateWorkspace(ctx, "Keys", email)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// newAPIKeyTestWorkflow creates a workflow named name in ws and returns its id.
func newAPIKeyTestWorkflow(t *testing.T, h *commands.Commands, ws, name string) string {
	t.Helper()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "`+name+`", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := h.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	return wf.ID
}

// A key scoped to ids that name no live workflow of its workspace could call nothing: the
// create is refused, naming the field and the ids, whichever surface asks (the API, the
// console and the CLI all create keys here).
func TestAPIKeyScopeNamesWorkflowsOfItsWorkspace(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h, _ := newAPIKeyTestHandler(t, func() time.Time { return now })
	ctx := context.Background()
	ws, other := newAPIKeyTestWorkspace(t, h), newAPIKeyTestWorkspace(t, h)
	mine, theirs, gone := newAPIKeyTestWorkflow(t, h, ws, "Mine"), newAPIKeyTestWorkflow(t, h, other, "Theirs"), newAPIKeyTestWorkflow(t, h, ws, "Gone")
	if err := h.Workflows.DeleteWorkflow(ctx, ws, gone); err != nil {
		t.Fatal(err)
	}
	nothing := uuid.NewString()
	for name, c := range map[string]struct {
		ids  []string
		want string
	}{
		"another workspace's":        {[]string{mine, theirs}, `allowedWorkflowIds: names no workflow of this workspace: "` + theirs + `"`},
		"no workflow at all":         {[]string{nothing, "wf-1"}, `"` + nothing + `", "wf-1"`},
		"a deleted one":              {[]string{gone}, `"` + gone + `"`},
		"more than the message says": {[]string{"a", "b", "c", "d", "e", "f", "g", mine}, `"a", "b", "c", "d", "e" and 2 more`},
	} {
		_, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, Label: name, AllowedWorkflowIDs: c.ids})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "allowedWorkflowIds" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a 400 on allowedWorkflowIds saying %s", name, err, c.want)
		}
	}
	m, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, AllowedWorkflowIDs: []string{mine}})
	if err != nil || len(m.AllowedWorkflowIDs) != 1 || m.AllowedWorkflowIDs[0] != mine {
		t.Fatalf("a key scoped to a workflow of its workspace: %+v %v", m, err)
	}
}

func TestCreateAndRevokeAPIKey(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h, store := newAPIKeyTestHandler(t, func() time.Time { return now })
	ctx := context.Background()
	ws := newAPIKeyTestWorkspace(t, h)

	expires := now.Add(24 * time.Hour)
	wf := newAPIKeyTestWorkflow(t, h, ws, "Deploy")
	m, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, Label: "CI", AllowedWorkflowIDs: []string{wf, " " + wf}, ExpiresAt: &expires})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := apikeys.ParseID(m.APIKey); err != nil || id != m.ID {
		t.Fatalf("apiKey %q embeds %q (%v), want id %s", m.APIKey, id, err, m.ID)
	}
	var body map[string]any
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"id", "apiKey", "apiSecret", "label", "allowedWorkflowIds", "expiresAt", "createdAt"} {
		if _, ok := body[f]; !ok {
			t.Errorf("minted key has no %s: %s", f, b)
		}
	}
	if len(body) != 7 {
		t.Errorf("minted key has extra fields: %s", b)
	}
	if got := body["allowedWorkflowIds"].([]any); len(got) != 1 || got[0] != wf {
		t.Errorf("allowedWorkflowIds %v", got)
	}

	s, err := h.Workspaces.APIKey(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.WorkspaceID != ws || s.KeyHash != apikeys.Hash(m.APIKey) || s.Revoked || !s.ExpiresAt.Equal(expires) || !s.CreatedAt.Equal(now) {
		t.Fatalf("folded key %+v", s)
	}
	priv, err := apikeys.ParseSecret(m.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := apikeys.ParsePublicKey(s.PublicKey)
	if !bytes.Equal(pub, priv.Public().(ed25519.PublicKey)) {
		t.Fatal("stored public key does not match the returned secret")
	}
	// The secret is in no event: nothing in the stream contains it.
	evs, err := store.ReadStream(ctx, commands.APIKeyStream(m.ID), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if bytes.Contains(ev.Data, []byte(m.APISecret)) || bytes.Contains(ev.Data, []byte(m.APIKey)) {
			t.Fatalf("event %s holds the secret or the key", ev.Type)
		}
	}

	if err := h.Workspaces.RevokeAPIKey(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.Workspaces.RevokeAPIKey(ctx, m.ID); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	if s, _ := h.Workspaces.APIKey(ctx, m.ID); !s.Revoked || s.RevokedAt == nil {
		t.Fatalf("after revoke %+v", s)
	}
	if evs, _ := store.ReadStream(ctx, commands.APIKeyStream(m.ID), 0, 10); len(evs) != 2 {
		t.Fatalf("%d events after two revocations, want 2", len(evs))
	}
}

func TestAPIKeyErrors(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h, _ := newAPIKeyTestHandler(t, func() time.Time { return now })
	ctx := context.Background()
	ws := newAPIKeyTestWorkspace(t, h)

	// A workspace id that is no UUID (NUL, invalid UTF-8 among them) is an unknown workspace,
	// never a store error.
	for _, id := range []string{uuid.NewString(), "default", "\x00", "\xff"} {
		if _, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: id}); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("workspace %q: %v", id, err)
		}
	}
	past := now.Add(-time.Minute)
	var ve *domain.ValidationError
	if _, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, ExpiresAt: &past}); !errors.As(err, &ve) || ve.Field != "expiresAt" {
		t.Fatalf("past expiry: %v", err)
	}
	m, err := h.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	if m.AllowedWorkflowIDs == nil || m.ExpiresAt != nil {
		t.Fatalf("defaults %+v", m)
	}
	for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
		if _, err := h.Workspaces.APIKey(ctx, id); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("APIKey(%q): %v", id, err)
		}
		if err := h.Workspaces.RevokeAPIKey(ctx, id); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("RevokeAPIKey(%q): %v", id, err)
		}
	}
	// Upper-case ids name the same stream.
	if _, err := h.Workspaces.APIKey(ctx, string(bytes.ToUpper([]byte(m.ID)))); err != nil {
		t.Fatalf("upper-case id: %v", err)
	}
}
