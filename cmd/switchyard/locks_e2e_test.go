package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// instanceNamed returns a copy of c for another serve process on c's database, listening on
// its own port, whose connections carry application_name name, so the test can count them.
func instanceNamed(t *testing.T, c *cli, name string) *cli {
	t.Helper()
	other := *c
	other.port = freePort(t)
	other.env = slices.Clone(c.env)
	for i, kv := range other.env {
		switch {
		case strings.HasPrefix(kv, "SWITCHYARD_LISTEN="):
			other.env[i] = fmt.Sprintf("SWITCHYARD_LISTEN=127.0.0.1:%d", other.port)
		case strings.HasPrefix(kv, "SWITCHYARD_BASE_URL="):
			other.env[i] = fmt.Sprintf("SWITCHYARD_BASE_URL=http://127.0.0.1:%d", other.port)
		case strings.HasPrefix(kv, "DATABASE_URL="):
			u, err := url.Parse(strings.TrimPrefix(kv, "DATABASE_URL="))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("application_name", name)
			u.RawQuery = q.Encode()
			other.env[i] = "DATABASE_URL=" + u.String()
		}
	}
	return &other
}

// A serve process holds the advisory locks of all its projectors and reactors, or waits for
// them, on one connection besides its pool: with a connection per lock, two instances took
// some ninety of PostgreSQL's hundred connection slots, and tests ran out of them.
func TestServeInstancesHoldTheirLocksOnOneConnection(t *testing.T) {
	c := newCLI(t)
	first := instanceNamed(t, c, "serve-first")
	second := instanceNamed(t, c, "serve-second")
	firstProc := first.serveReady()
	second.serveReady()

	conn := c.connect(t)
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The projectors' locks, and those of the scheduler, bulks, schedules and debounce.
	locks := len(projections.All()) + 4
	// usage returns an instance's connections, its session advisory locks held, and the
	// connections holding them.
	usage := func(app string) (conns, held, holding int) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1),
			(SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			  WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND a.application_name = $1),
			(SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			  WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND a.application_name = $1)`,
			app).Scan(&conns, &held, &holding)
		if err != nil {
			t.Fatal(err)
		}
		return conns, held, holding
	}
	// Besides its pool, serve keeps the lock session and the event store's listener.
	const most = childPoolSize + 3
	check := func(app string, wantHeld bool) {
		t.Helper()
		var conns, held, holding int
		if wantHeld {
			testenv.Eventually(t, time.Minute, app+" holding every lock", func() bool {
				conns, held, holding = usage(app)
				return held >= locks
			})
		} else {
			conns, held, holding = usage(app)
		}
		t.Logf("%s: %d connections, %d locks held on %d of them", app, conns, held, holding)
		if conns > most {
			t.Errorf("%s uses %d connections, want at most %d (a pool of %d, the lock session and the listener)", app, conns, most, childPoolSize)
		}
		if holding > 1 {
			t.Errorf("%s holds its %d locks on %d connections, want 1", app, held, holding)
		}
	}
	check("serve-first", true)
	check("serve-second", false) // the standby waits for every lock on one connection too

	firstProc.stop(t, 30*time.Second)
	check("serve-second", true)
}
