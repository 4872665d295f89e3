package replay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/testdb"
)

// Calls that arrive while the guard's statements are busy share the next one, and it still
// answers each signature once: a signature twice in one batch is a replay.
func TestQueuedCallsShareOneStatement(t *testing.T) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	g := New(pool, Config{Concurrency: 1})
	b := g.batches
	b.mu.Lock()
	b.running = 1 // the only statement slot is busy
	b.mu.Unlock()

	const calls = 10 // five signatures, each sent twice
	until := time.Now().Add(5 * time.Minute)
	type answer struct {
		seen bool
		err  error
	}
	answers := make(chan answer, calls)
	for i := range calls {
		go func() {
			seen, err := g.Seen(ctx, []byte(fmt.Sprint("sig-", i/2)), until)
			answers <- answer{seen, err}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		queued := len(b.queue)
		b.mu.Unlock()
		if queued == calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls queued", queued, calls)
		}
		time.Sleep(time.Millisecond)
	}
	b.next() // the busy statement ends: the next one takes the whole queue

	accepted := 0
	for range calls {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		if !a.seen {
			accepted++
		}
	}
	if accepted != calls/2 {
		t.Fatalf("%d of %d distinct signatures accepted", accepted, calls/2)
	}
	if n := b.statements.Load(); n != 1 {
		t.Fatalf("%d statements for one queue of calls, want 1", n)
	}
	if seen, err := g.Seen(ctx, []byte("sig-0"), until); err != nil || !seen {
		t.Fatalf("a later replay: seen=%v err=%v", seen, err)
	}
}
