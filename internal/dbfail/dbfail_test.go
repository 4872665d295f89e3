package dbfail_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/internal/dbfail"
	"github.com/switchyard/switchyard/internal/testdb"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// admin runs sql on the test server's admin database.
func admin(t *testing.T, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), testdb.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func dbName(t *testing.T, pool *pgxpool.Pool) string {
	var name string
	if err := pool.QueryRow(ctx(t), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// Real failures of a real server, each as the service's code sees it.
func TestUnavailableClassifiesRealConnectionFailures(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		_, err := pgx.Connect(ctx(t), "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=5")
		if err == nil || !dbfail.Unavailable(err) {
			t.Fatalf("Unavailable(%v) = false", err)
		}
	})
	t.Run("backend terminated by an administrator (57P01)", func(t *testing.T) {
		pool, _ := testdb.NewPool(t)
		conn, err := pool.Acquire(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		pid := conn.Conn().PgConn().PID()
		admin(t, "SELECT pg_terminate_backend($1)", int(pid))
		_, err = conn.Exec(ctx(t), "SELECT 1")
		if err == nil || !dbfail.Unavailable(fmt.Errorf("read stream: %w", err)) {
			t.Fatalf("Unavailable(%v) = false", err)
		}
	})
	t.Run("database refusing connections, and the pool after its connections were killed", func(t *testing.T) {
		pool, _ := testdb.NewPool(t)
		name := dbName(t, pool)
		admin(t, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false")
		t.Cleanup(func() { admin(t, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true") })
		admin(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
		var err error
		for range 3 { // each dead idle connection fails once before the pool dials again
			if _, err = pool.Exec(ctx(t), "SELECT 1"); err == nil {
				t.Fatal("a query succeeded on a database refusing connections")
			}
			if !dbfail.Unavailable(err) {
				t.Fatalf("Unavailable(%v) = false", err)
			}
		}
	})
	t.Run("closed pool", func(t *testing.T) {
		pool, _ := testdb.NewPool(t)
		pool.Close()
		err := pool.Ping(ctx(t))
		if err == nil || !dbfail.Unavailable(err) {
			t.Fatalf("Unavailable(%v) = false", err)
		}
	})
}

func TestUnavailableLeavesOtherErrorsAlone(t *testing.T) {
	pool, _ := testdb.NewPool(t)
	_, syntax := pool.Exec(ctx(t), "SELEC 1")
	_, unique := pool.Exec(ctx(t), "CREATE TEMP TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1), (1)")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, canceled := pool.Exec(cancelled, "SELECT 1")
	for _, err := range []error{syntax, unique, canceled, domain.ErrNotFound, domain.Invalid("x", "bad"), errors.New("boom"), nil} {
		if dbfail.Unavailable(err) {
			t.Errorf("Unavailable(%v) = true", err)
		}
	}
	if !dbfail.Unavailable(fmt.Errorf("kurrentdb: %w", domain.ErrUnavailable)) {
		t.Error("an error wrapping domain.ErrUnavailable must count")
	}
}
