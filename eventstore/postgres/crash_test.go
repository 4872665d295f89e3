package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
)

// crashChildEnv carries the database URL to the re-executed test binary that appends until it
// is killed.
const crashChildEnv = "SWITCHYARD_GROUP_CRASH_CHILD_DSN"

// TestCrashMidGroupCommit kills a process with SIGKILL while its appends are in group commits,
// then checks the log against what the process told its callers: every acknowledged append is
// in the log, where it was acknowledged, and no refused append is. Appends in flight at the
// kill may be in the log or not (their callers never heard), but never in part.
func TestCrashMidGroupCommit(t *testing.T) {
	if dsn := os.Getenv(crashChildEnv); dsn != "" {
		crashChild(dsn)
		return
	}
	pool, dsn := newMigratedDB(t, 8)
	ctx := testCtx(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidGroupCommit$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill() //nolint:errcheck
			cmd.Wait()         //nolint:errcheck
		}
	}()

	acked := map[uuid.UUID]eventstore.Position{}
	refused := map[uuid.UUID]bool{}
	var groupedAcks atomic.Int64
	lines := bufio.NewScanner(out)
	read := func() bool {
		if !lines.Scan() {
			return false
		}
		f := strings.Fields(lines.Text())
		switch {
		case len(f) == 3 && f[0] == "ACK":
			pos, err := eventstore.ParsePosition(f[2])
			if err != nil {
				t.Fatalf("child line %q: %v", lines.Text(), err)
			}
			acked[uuid.MustParse(f[1])] = pos
		case len(f) == 2 && f[0] == "REFUSED":
			refused[uuid.MustParse(f[1])] = true
		case len(f) == 2 && f[0] == "GROUPED":
			groupedAcks.Store(1)
		}
		return true
	}
	// Let the child get going: some acknowledgements, some refusals, and appends that shared
	// a transaction with others.
	for len(acked) < 2000 || len(refused) < 50 || groupedAcks.Load() == 0 {
		if !read() {
			t.Fatalf("child ended before the kill (%d acks, %d refusals): %v", len(acked), len(refused), lines.Err())
		}
	}
	// Kill while one of its group transactions is executing on the server.
	pollUntil(t, "a group commit of the child is executing", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
			  AND query LIKE '%INSERT INTO events%'`).Scan(&n)
		return err == nil && n > 0
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	for read() {
	}
	cmd.Wait() //nolint:errcheck // killed on purpose

	stored := map[uuid.UUID]eventstore.Position{}
	rows, err := pool.Query(ctx, `SELECT event_id, tx_id, position FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id     uuid.UUID
			commit uint64
			prep   int64
		)
		if err := rows.Scan(&id, &commit, &prep); err != nil {
			t.Fatal(err)
		}
		stored[id] = eventstore.Position{Commit: commit, Prepare: uint64(prep)}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, pos := range acked {
		got, ok := stored[id]
		if !ok {
			t.Errorf("acknowledged append of %s (at %s) is not in the log", id, pos)
		} else if got != pos {
			t.Errorf("acknowledged append of %s at %s is in the log at %s", id, pos, got)
		}
	}
	for id := range refused {
		if _, ok := stored[id]; ok {
			t.Errorf("refused append of %s is in the log", id)
		}
	}
	checkStreamsConsistent(t, pool)
	t.Logf("%d acknowledged, %d refused, %d stored (in-flight appends at the kill may be either)", len(acked), len(refused), len(stored))
}

// checkStreamsConsistent checks each stream's row against its events: revisions 0..n-1 with
// no gap, as a half-written append would leave.
func checkStreamsConsistent(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var bad int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FROM streams s
		WHERE s.revision + 1 <> (SELECT count(*) FROM events e WHERE e.stream = s.name)
		   OR s.revision <> (SELECT max(revision) FROM events e WHERE e.stream = s.name)`).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d streams whose row disagrees with their events", bad)
	}
}

// crashChild appends from 32 goroutines until it is killed, printing each outcome: "ACK id
// position" once Append has returned it, "REFUSED id" for a wrong expected version. Half the
// appends go to fresh streams, half race on a few contended streams with exact expectations,
// so groups hold both kinds.
func crashChild(dsn string) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	st, err := New(ctx, pool, Config{GroupConcurrency: 2})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	var (
		contended [8]atomic.Uint64 // last revision seen per contended stream, +1
		wg        sync.WaitGroup
		commits   sync.Map // commit -> first event id acknowledged in it
	)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				ev := eventstore.EventData{ID: uuid.New(), Type: "Crashed", Data: []byte(`{"k": "v"}`)}
				stream, expected := "fresh-"+ev.ID.String(), eventstore.NoStream()
				c := (g + i) % len(contended)
				if i%2 == 1 {
					stream = fmt.Sprintf("contended-%d", c)
					if seen := contended[c].Load(); seen == 0 {
						expected = eventstore.NoStream()
					} else {
						expected = eventstore.Exact(seen - 1)
					}
				}
				res, err := st.Append(ctx, stream, expected, ev)
				switch {
				case err == nil:
					if i%2 == 1 {
						contended[c].Store(res.NextRevision + 1)
					}
					if first, loaded := commits.LoadOrStore(res.Position.Commit, ev.ID); loaded && first != ev.ID {
						say("GROUPED %d", res.Position.Commit)
					}
					say("ACK %s %s", ev.ID, res.Position)
				case errors.Is(err, eventstore.ErrWrongExpectedVersion):
					say("REFUSED %s", ev.ID)
				default:
					say("ERROR %s %v", ev.ID, err)
					time.Sleep(10 * time.Millisecond) // a backoff, not a wait for a condition
				}
			}
		}()
	}
	wg.Wait()
}
