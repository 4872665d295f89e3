package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/projections"
)

// TestAPIKeysProjection mints and revokes keys, checks the read model and its queries, then
// rebuilds the projector and compares the table row for row.
func TestAPIKeysProjection(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := projections.Migrate(ctx, pool, []projections.Projector{projections.APIKeys{}}); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	cmds := commands.New(store, commands.WithClock(func() time.Time { clock = clock.Add(time.Second); return clock }))
	email := "keys-" + uuid.NewString()[:8] + "@example.com"
	if _, err := cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123"}); err != nil {
		t.Fatal(err)
	}
	ws, err := cmds.Workspaces.CreateWorkspace(ctx, "Keys", email)
	if err != nil {
		t.Fatal(err)
	}
	// A key's allowed workflows are live workflows of its workspace (commands.CreateAPIKey).
	var allowed []string
	for _, name := range []string{"A", "B"} {
		var def workflow.Definition
		if err := json.Unmarshal([]byte(`{"name": "`+name+`", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`), &def); err != nil {
			t.Fatal(err)
		}
		wf, err := cmds.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: def})
		if err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, wf.ID)
	}
	var minted []commands.APIKeyMinted
	for i := 0; i < 5; i++ {
		c := commands.CreateAPIKey{WorkspaceID: ws, Label: fmt.Sprint("key ", i)}
		if i == 1 {
			c.AllowedWorkflowIDs = allowed
			exp := clock.Add(48 * time.Hour)
			c.ExpiresAt = &exp
		}
		m, err := cmds.Workspaces.CreateAPIKey(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		minted = append(minted, m)
	}
	if err := cmds.Workspaces.RevokeAPIKeyWithReason(ctx, minted[2].ID, "rotated"); err != nil {
		t.Fatal(err)
	}
	if err := cmds.Workspaces.RevokeAPIKeyWithReason(ctx, minted[2].ID, "again"); err != nil {
		t.Fatal(err)
	}

	eng, err := projections.NewEngine(pool, store, []projections.Projector{projections.APIKeys{}}, projections.EngineConfig{RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	head, err := store.HeadPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	defer waitCancel()
	if err := eng.WaitFor(waitCtx, "apikeys", head); err != nil {
		t.Fatalf("apikeys projector did not catch up: %v", err)
	}

	q := projections.NewQueries(pool)
	list, total, err := q.APIKeysOf(ctx, ws, projections.Page{Page: 1, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if total != 5 || len(list) != 2 || list[0].ID != minted[4].ID || list[1].ID != minted[3].ID {
		t.Fatalf("page 1: total %d, %+v", total, list)
	}
	list, _, err = q.APIKeysOf(ctx, ws, projections.Page{Page: 3, Limit: 2})
	if err != nil || len(list) != 1 || list[0].ID != minted[0].ID {
		t.Fatalf("page 3: %+v %v", list, err)
	}
	if list, total, err := q.APIKeysOf(ctx, uuid.NewString(), projections.Page{Page: 1, Limit: 10}); err != nil || total != 0 || list == nil {
		t.Fatalf("unknown workspace: %v %d %v", list, total, err)
	}
	k1, err := q.APIKeyByID(ctx, minted[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(k1.AllowedWorkflowIDs, allowed) || k1.ExpiresAt == nil || !k1.ExpiresAt.Equal(*minted[1].ExpiresAt) ||
		k1.RevokedAt != nil || k1.WorkspaceID != ws || k1.Label != "key 1" || !k1.CreatedAt.Equal(minted[1].CreatedAt) {
		t.Fatalf("key 1 row %+v", k1)
	}
	k0, _ := q.APIKeyByID(ctx, minted[0].ID)
	if k0.AllowedWorkflowIDs == nil || len(k0.AllowedWorkflowIDs) != 0 || k0.ExpiresAt != nil {
		t.Fatalf("key 0 row %+v", k0)
	}
	folded, _ := cmds.Workspaces.APIKey(ctx, minted[2].ID)
	k2, _ := q.APIKeyByID(ctx, minted[2].ID)
	if k2.RevokedAt == nil || !k2.RevokedAt.Equal(*folded.RevokedAt) || k2.RevokeReason != "rotated" {
		t.Fatalf("revoked row %+v", k2)
	}
	if _, err := q.APIKeyByID(ctx, uuid.NewString()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}

	before := apiKeyRows(t, pool)
	if err := eng.Rebuild(ctx, "apikeys", nil); err != nil {
		t.Fatal(err)
	}
	if after := apiKeyRows(t, pool); len(before) != 5 || !reflect.DeepEqual(before, after) {
		t.Fatalf("rebuilt api_keys differ:\nbefore %v\nafter  %v", before, after)
	}
}

// apiKeyRows reads the api_keys table as sorted JSON rows.
func apiKeyRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT to_jsonb(t)::text FROM api_keys t ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return list
}
