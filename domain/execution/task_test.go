package execution_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

func workerTask(attempts int) execution.State {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	return execution.State{}.Evolve(execution.Submitted{ExecutionID: "e", WorkspaceID: "w", Module: "acme.resize",
		Attempts: attempts, Transport: &execution.Transport{Type: execution.TransportWorker}, At: at})
}

func foldAll(s execution.State, events []domain.Event) execution.State {
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func TestTaskLeaseExtendAndExpire(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	s := workerTask(2)
	if _, err := execution.DecideLease(execution.State{}.Evolve(execution.Submitted{ExecutionID: "b"}), "w1", time.Second, now); !errors.Is(err, execution.ErrNotClaimable) {
		t.Fatalf("a built-in is leasable: %v", err)
	}
	ev, err := execution.DecideLease(s, "w1", 30*time.Second, now)
	if err != nil {
		t.Fatal(err)
	}
	s = foldAll(s, ev)
	if s.Status != execution.StatusRunning || s.Worker != "w1" || s.Attempt != 1 || !s.HoldsTask(1) {
		t.Fatalf("leased: %+v", s)
	}
	if _, err := execution.DecideLease(s, "w2", 30*time.Second, now.Add(time.Second)); !errors.Is(err, execution.ErrNotClaimable) {
		t.Fatalf("a held lease was leased again: %v", err)
	}
	ev, err = execution.DecideExtend(s, 1, 30*time.Second, now.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s = foldAll(s, ev)
	if want := now.Add(50 * time.Second); !s.LeaseUntil.Equal(want) {
		t.Fatalf("lease until %v, want %v", s.LeaseUntil, want)
	}
	if _, err := execution.DecideExtend(s, 2, time.Second, now); !errors.Is(err, execution.ErrTaskNotHeld) {
		t.Fatalf("another attempt's heartbeat: %v", err)
	}
	if _, err := execution.DecideExpire(s, now.Add(49*time.Second)); !errors.Is(err, execution.ErrNotClaimable) {
		t.Fatalf("expired a live lease: %v", err)
	}
	// Past the lease, a lease by another worker fails attempt 1 and leases attempt 2 in one go.
	later := now.Add(51 * time.Second)
	ev, err = execution.DecideLease(s, "w2", 30*time.Second, later)
	if err != nil || len(ev) != 2 {
		t.Fatalf("lease after expiry: %v %v", ev, err)
	}
	s = foldAll(s, ev)
	if s.Attempt != 2 || s.Worker != "w2" || s.HoldsTask(1) || !s.HoldsTask(2) {
		t.Fatalf("after expiry: %+v", s)
	}
	// The stale holder's outcome changes nothing.
	if _, err := execution.DecideComplete(s, "w1", 1, nil, 0, later); !errors.Is(err, execution.ErrLeaseLost) {
		t.Fatalf("stale completion: %v", err)
	}
	// The last attempt's expiry fails the execution, with lease_expired.
	ev, err = execution.DecideExpire(s, later.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	s = foldAll(s, ev)
	if s.Status != execution.StatusFailed || string(s.Error) == "" || !containsCode(s, execution.CodeLeaseExpired) {
		t.Fatalf("after the last expiry: %+v", s)
	}
	if _, err := execution.DecideLease(s, "w3", time.Second, later.Add(time.Hour)); !errors.Is(err, execution.ErrNotClaimable) {
		t.Fatalf("a failed execution was leased: %v", err)
	}
}

func TestTaskIDRoundTrip(t *testing.T) {
	id, n, ok := execution.ParseTaskID(execution.TaskID("0b6f3c9e-1a2b-4c3d-8e9f-001122334455", 3))
	if !ok || id != "0b6f3c9e-1a2b-4c3d-8e9f-001122334455" || n != 3 {
		t.Fatalf("round trip: %q %d %v", id, n, ok)
	}
	for _, bad := range []string{"", "x", ".1", "e.0", "e.x", "e.-1"} {
		if _, _, ok := execution.ParseTaskID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func containsCode(s execution.State, code string) bool {
	return strings.Contains(string(s.Error), `"code":"`+code+`"`)
}
