package webhooks_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/testenv"
)

// BenchmarkDeliveries measures signed webhook deliveries per second from one dispatcher (default
// concurrency) to a local HTTPS receiver: WEBHOOK_BENCH_N (default 2000) executions finish
// first, then the dispatcher starts and the clock runs until every one is recorded delivered
// (its sweep feeds it: the backlog case, bounded by the dispatcher's concurrency).
// Each delivery is a claim append, the HTTPS POST and an outcome append (docs/performance.md).
//
//	go test ./reactors/webhooks/ -run '^$' -bench BenchmarkDeliveries -benchtime 1x
func BenchmarkDeliveries(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("WEBHOOK_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		f := newFixture(b)
		rc := newReceiver(b, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) })
		ids := make([]string, n)
		for i := range n {
			ids[i] = f.finished(b, rc.srv.URL, "bench-secret", map[string]string{"X-Tenant": "bench"}, 1)
		}
		f.env.CaughtUp(b, projections.Webhooks{}.Name())
		d := webhooks.New(f.env.Store, commands.New(f.env.Store), f.env.Queries, f.sealer, webhooks.Config{Worker: "bench",
			RootCAs: rc.roots(), AllowPrivate: true, Logger: quiet(), SweepInterval: 10 * time.Millisecond, SweepGrace: time.Millisecond})
		start := time.Now()
		stop := testenv.Go(b, d.Run)
		cmds := commands.New(f.env.Store)
		for _, id := range ids {
			testenv.Eventually(b, 5*time.Minute, "delivery", func() bool {
				st, err := cmds.Executions.Execution(context.Background(), id)
				return err == nil && !st.Delivery.DeliveredAt.IsZero()
			})
		}
		elapsed := time.Since(start)
		stop()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "deliveries/s")
		b.Logf("%d signed deliveries in %s: %.0f/s (requests seen: %d)", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), len(rc.deliveries()))
	}
}
