package replay_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/postgres"
	"github.com/switchyard/switchyard/internal/replay"
	"github.com/switchyard/switchyard/internal/testdb"
)

// TestSharedAcrossGuards stands for two serve processes: each signature is accepted by exactly
// one of the guards, however the requests are spread and raced.
func TestSharedAcrossGuards(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := replay.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := replay.Migrate(ctx, pool); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	opts := replay.Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }}
	a, b := replay.New(pool, opts), replay.New(pool, opts)
	until := now.Add(5 * time.Minute)

	sig := []byte("signature-1")
	if seen, err := a.Seen(ctx, sig, until); err != nil || seen {
		t.Fatalf("first use on A: seen=%v err=%v", seen, err)
	}
	if seen, err := b.Seen(ctx, sig, until); err != nil || !seen {
		t.Fatalf("replay on B: seen=%v err=%v", seen, err)
	}
	if seen, _ := a.Seen(ctx, sig, until); !seen {
		t.Fatal("replay on A not seen")
	}

	var accepted atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		g := a
		if i%2 == 1 {
			g = b
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			seen, err := g.Seen(ctx, []byte(fmt.Sprint("raced-", i/4)), until)
			if err != nil {
				t.Error(err)
			}
			if !seen {
				accepted.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if n := accepted.Load(); n != 10 {
		t.Fatalf("%d of 10 distinct signatures accepted across the guards", n)
	}

	// Only the hash is stored.
	var stored []byte
	sum := sha256.Sum256(sig)
	if err := pool.QueryRow(ctx, `SELECT key FROM eventstore_claims WHERE key = $1`, sum[:]).Scan(&stored); err != nil {
		t.Fatalf("hash of the signature not stored: %v", err)
	}
	var raw int
	pool.QueryRow(ctx, `SELECT count(*) FROM eventstore_claims WHERE key = $1`, sig).Scan(&raw)
	if raw != 0 {
		t.Fatal("the raw signature is stored")
	}

	// Past the window the rows are purged and a signature (which the timestamp check would
	// refuse by then anyway) no longer counts as seen.
	clock.Store(until.Add(time.Second).UnixNano())
	n, err := a.Purge(ctx)
	if err != nil || n != 11 {
		t.Fatalf("purged %d rows (%v), want 11", n, err)
	}
	if seen, _ := b.Seen(ctx, sig, until.Add(5*time.Minute)); seen {
		t.Fatal("expired signature still seen")
	}
}

// TestExpiredRowTakenOverBeforePurge checks the insert ignores a stale row that no purge
// removed yet, and that Seen purges on its own once a purge is due.
func TestExpiredRowTakenOverBeforePurge(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := replay.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	g := replay.New(pool, replay.Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }, PurgeEvery: time.Minute})
	for i := 0; i < 3; i++ {
		if seen, err := g.Seen(ctx, []byte(fmt.Sprint("s", i)), now.Add(time.Minute)); err != nil || seen {
			t.Fatalf("seen=%v err=%v", seen, err)
		}
	}
	clock.Store(now.Add(2 * time.Minute).UnixNano())
	if seen, err := g.Seen(ctx, []byte("s0"), now.Add(5*time.Minute)); err != nil || seen {
		t.Fatalf("stale row blocked a new use: seen=%v err=%v", seen, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM eventstore_claims`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 1 {
		t.Fatalf("%d rows after the due purge, want 1 (the renewed s0)", left)
	}
}

// TestTakeUnderOwner: a signature taken under an owner may be taken again by that owner (a
// submit that claimed it in its commit, then settles it), never by anyone else, and is seen by
// Seen; and a signature a multi-append took in its commit is taken for the guard too.
func TestTakeUnderOwner(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := replay.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	g := replay.New(pool, replay.Config{})
	until := time.Now().Add(5 * time.Minute)
	sig, alice, bob := []byte("signature-owned"), []byte("alice"), []byte("bob")
	for i := range 2 {
		if seen, err := g.Take(ctx, sig, alice, until); err != nil || seen {
			t.Fatalf("take %d under its owner: seen=%v err=%v", i+1, seen, err)
		}
	}
	if seen, err := g.Take(ctx, sig, bob, until); err != nil || !seen {
		t.Fatalf("take under another owner: seen=%v err=%v, want seen", seen, err)
	}
	if seen, err := g.Seen(ctx, sig, until); err != nil || !seen {
		t.Fatalf("Seen after Take: seen=%v err=%v, want seen", seen, err)
	}

	store, err := postgres.New(ctx, pool, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	committed := []byte("signature-committed")
	sum := sha256.Sum256(committed)
	_, err = store.AppendMulti(ctx, eventstore.StreamAppend{Stream: "claimed-" + uuid.NewString(), Expected: eventstore.NoStream(),
		Events: []eventstore.EventData{{ID: uuid.New(), Type: "Done", Data: []byte(`{}`)}},
		Claims: []eventstore.Claim{{Key: sum[:], Owner: alice, Until: until}}})
	if err != nil {
		t.Fatalf("append taking the signature: %v", err)
	}
	if seen, err := g.Take(ctx, committed, alice, until); err != nil || seen {
		t.Fatalf("take what its owner's commit took: seen=%v err=%v", seen, err)
	}
	if seen, err := g.Seen(ctx, committed, until); err != nil || !seen {
		t.Fatalf("Seen of what a commit took: seen=%v err=%v, want seen", seen, err)
	}
}

// TestMigrateMovesOldSignatures: signatures remembered before the claims table are still
// refused after the upgrade.
func TestMigrateMovesOldSignatures(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	sig := []byte("signature-before-upgrade")
	sum := sha256.Sum256(sig)
	until := time.Now().Add(5 * time.Minute)
	if _, err := pool.Exec(ctx, `CREATE UNLOGGED TABLE sdk_signatures (sig bytea PRIMARY KEY, expires_at timestamptz NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sdk_signatures VALUES ($1, $2)`, sum[:], until); err != nil {
		t.Fatal(err)
	}
	if err := replay.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if seen, err := replay.New(pool, replay.Config{}).Seen(ctx, sig, until); err != nil || !seen {
		t.Fatalf("a signature used before the upgrade: seen=%v err=%v, want seen", seen, err)
	}
}
