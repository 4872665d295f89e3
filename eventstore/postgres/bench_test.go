package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

// benchData is the payload of benchmark events; scripts/bench-append.sh inserts the same JSON
// with pgbench, so the two figures compare like with like.
var benchData = []byte(`{"n": 1, "s": "data"}`)

// BenchmarkAppend measures appends per second with 1, 16 and 64 concurrent appenders, one event
// per append, each appender on a different stream at any moment (10,000 streams in turn), so
// it measures the store rather than contention on one stream. The pool has a connection per
// appender: fewer would measure waiting for the pool.
//
//	go test ./eventstore/postgres -run '^$' -bench BenchmarkAppend -benchtime 10s
func BenchmarkAppend(b *testing.B) {
	pool, _ := newMigratedDB(b, 68)
	st := newStore(b, pool, Config{})
	for _, c := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) { benchAppend(b, st, c) })
	}
}

// BenchmarkAppendGroupConcurrency compares Config.GroupConcurrency settings at 16 and 64
// appenders.
func BenchmarkAppendGroupConcurrency(b *testing.B) {
	pool, _ := newMigratedDB(b, 68)
	for _, g := range []int{4, 8, 16, 64} {
		st := newStore(b, pool, Config{GroupConcurrency: g})
		for _, c := range []int{16, 64} {
			b.Run(fmt.Sprintf("g%d/c%d", g, c), func(b *testing.B) { benchAppend(b, st, c) })
		}
	}
}

func benchAppend(b *testing.B, st *Store, concurrency int) {
	const streams = 10_000
	ctx := context.Background()
	// Streams names are made before the clock starts, so the benchmark times the store only.
	names := make([]string, streams)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%d", i)
	}
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	b.ResetTimer()
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) || failed.Load() {
					return
				}
				ev := eventstore.EventData{ID: uuid.New(), Type: "Benchmarked", Data: benchData}
				if _, err := st.Append(ctx, names[i%streams], eventstore.Any(), ev); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
}

// preloadEvents bulk-inserts n events over n/1000 streams in one statement (the rows
// eventstore_append would write), much faster than appending them, to give catch-up
// benchmarks a log to read.
func preloadEvents(b *testing.B, st *Store, n int) eventstore.Position {
	ctx := context.Background()
	_, err := st.pool.Exec(ctx, `
WITH ins AS (
    INSERT INTO events (stream, revision, event_id, type, category, data, metadata)
    SELECT 'preload-' || (g / 1000), g % 1000, gen_random_uuid(), 'Preloaded', 'preload',
           jsonb_build_object('n', g, 'name', 'event ' || g, 'amount', g * 1.5, 'tags', jsonb_build_array('a', 'b')),
           jsonb_build_object('correlationId', gen_random_uuid())
    FROM generate_series(0, $1::int - 1) AS g
    ORDER BY g
    RETURNING stream, revision
)
INSERT INTO streams (name, revision, tx_id)
SELECT stream, max(revision), pg_current_xact_id() FROM ins GROUP BY stream`, n)
	if err != nil {
		b.Fatalf("preload: %v", err)
	}
	var head eventstore.Position
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		head, err = st.HeadPosition(ctx)
		if err != nil {
			b.Fatalf("head: %v", err)
		}
		var count int
		if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE (tx_id, position) <= ($1::xid8, $2::bigint)`, head.Commit, int64(head.Prepare)).Scan(&count); err != nil {
			b.Fatalf("count: %v", err)
		}
		if count == n {
			return head
		}
		if time.Now().After(deadline) {
			b.Fatalf("preloaded events not visible after a minute")
		}
		<-tick.C
	}
}

// BenchmarkCatchUp measures reading a 200,000-event log from the start, through a
// subscription and through ReadAll pages, in events per second.
//
//	go test ./eventstore/postgres -run '^$' -bench BenchmarkCatchUp
func BenchmarkCatchUp(b *testing.B) {
	const n = 200_000
	pool, _ := newMigratedDB(b, 8)
	st := newStore(b, pool, Config{})
	head := preloadEvents(b, st, n)
	if _, err := pool.Exec(context.Background(), "VACUUM ANALYZE events"); err != nil {
		b.Fatalf("vacuum: %v", err)
	}

	b.Run("Subscribe", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			ctx, cancel := context.WithCancel(context.Background())
			sub, err := st.Subscribe(ctx, eventstore.Start, eventstore.Filter{})
			if err != nil {
				b.Fatalf("subscribe: %v", err)
			}
			for got := 0; got < n; got++ {
				ev, ok := <-sub.Events()
				if !ok {
					b.Fatalf("subscription ended after %d events: %v", got, sub.Err())
				}
				if got == n-1 && ev.Position != head {
					b.Fatalf("last event at %s, want %s", ev.Position, head)
				}
			}
			sub.Close()
			cancel()
		}
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
	})

	b.Run("ReadAll", func(b *testing.B) {
		ctx := context.Background()
		start := time.Now()
		for range b.N {
			got := 0
			for from := eventstore.Start; ; {
				page, err := st.ReadAll(ctx, from, 1000, eventstore.Filter{})
				if err != nil {
					b.Fatalf("read all: %v", err)
				}
				if len(page) == 0 {
					break
				}
				got += len(page)
				from = page[len(page)-1].Position
			}
			if got != n {
				b.Fatalf("read %d events, want %d", got, n)
			}
		}
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
	})

	b.Run("ReadAllFilteredSparse", func(b *testing.B) {
		// A category the log does not hold: what scanning past non-matching events costs.
		ctx := context.Background()
		start := time.Now()
		for range b.N {
			page, err := st.ReadAll(ctx, eventstore.Start, 1000, eventstore.Filter{Categories: []string{"absent"}})
			if err != nil || len(page) != 0 {
				b.Fatalf("read all: %d events, %v", len(page), err)
			}
		}
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "scanned/s")
	})
}
