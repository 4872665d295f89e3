// Package testdb gives each test its own PostgreSQL database, dropped when the test ends, so
// tests never share data. The server is DATABASE_URL's, or 127.0.0.1:5432 as user postgres.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultAdminURL is used when DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL is the URL of a database on the test server from which databases are created.
func AdminURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultAdminURL
}

// New creates an empty database and returns its URL; the database is dropped at cleanup.
func New(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := AdminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testdb: connect to %s: %v (run the tests through scripts/test.sh, which provides PostgreSQL)", redact(admin), err)
	}
	defer conn.Close(ctx)
	name := "sw_test_" + randomHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	t.Cleanup(func() { drop(t, admin, name) })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("testdb: parse %s: %v", redact(admin), err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewPool creates a database as New does and returns a pool on it, closed at cleanup.
func NewPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := New(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("testdb: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, dsn
}

func drop(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Errorf("testdb: connect to drop %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("testdb: drop %s: %v", name, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testdb: random: %v", err))
	}
	return hex.EncodeToString(b)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// SetConnections makes the test's own database dbName accept or refuse connections and, when
// refusing, ends the connections it has (its backends only: the server is shared): a database
// outage for one test.
func SetConnections(t testing.TB, dbName string, allow bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{dbName}.Sanitize()+" ALLOW_CONNECTIONS "+map[bool]string{true: "true", false: "false"}[allow]); err != nil {
		t.Fatal(err)
	}
	if !allow {
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", dbName); err != nil {
			t.Fatal(err)
		}
	}
}
