package kurrent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/eventstore/kurrent"
	"github.com/switchyard/switchyard/eventstore/storetest"
)

// TestConformance runs the eventstore conformance suite against a KurrentDB server. It needs one:
//
//	KURRENTDB_URL='esdb://localhost:2113?tls=false' go test ./eventstore/kurrent/ -count=1 -v
//
// KurrentDB has a single global log ($all) per server, so a test cannot get an empty server of its
// own. Each test's store gets a fresh random StreamPrefix instead: its streams are written under that
// prefix, and its reads of $all, subscriptions and HeadPosition see only them, so every test starts
// from what looks like an empty log. The events stay on the server (an append-only log cannot drop
// them); use a throwaway server.
func TestConformance(t *testing.T) {
	url := os.Getenv("KURRENTDB_URL")
	if url == "" {
		t.Skip("KURRENTDB_URL not set: KurrentDB conformance run skipped")
	}
	storetest.RunWithOptions(t, func(t *testing.T) eventstore.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := kurrent.New(ctx, url, kurrent.Config{StreamPrefix: testPrefix(t)})
		if err != nil {
			t.Fatalf("connect to KurrentDB at %s: %v", url, err)
		}
		return s
	}, storetest.Options{StreamScopedEventIDs: true, NonAtomicAppendMulti: true}) // docs/kurrentdb.md
}

// testPrefix is a stream prefix no other test (of this run or an earlier one) uses.
func testPrefix(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "storetest_" + hex.EncodeToString(b[:]) + "_"
}
