package executor

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Freed slots go to workspaces in turn, and no workspace holds more than its share.
func TestSlotsShareAndTurns(t *testing.T) {
	s := newSlots(4, 2)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	started := make(chan string, 100)
	job := func(ws string) func() {
		return func() {
			mu.Lock()
			order = append(order, ws)
			mu.Unlock()
			started <- ws
			<-release
		}
	}
	for range 10 {
		s.submit("a", job("a"))
	}
	for range 3 {
		s.submit("b", job("b"))
	}
	s.submit("c", job("c"))
	// Four slots: a's share of two, then b's share of two; c waits for a free slot.
	got := map[string]int{}
	for range 4 {
		got[<-started]++
	}
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("first four runs by workspace: %v, want a:2 b:2", got)
	}
	if q := s.queued(); q != 10 {
		t.Fatalf("queued %d, want 10", q)
	}
	// One slot frees: c, holding none, goes before a and b, which hold slots already.
	release <- struct{}{}
	select {
	case ws := <-started:
		if ws != "c" {
			t.Fatalf("the freed slot went to %s, want c", ws)
		}
	case <-time.After(time.Minute):
		t.Fatal("no job started after a slot freed")
	}
	close(release)
	for range 9 {
		<-started
	}
}

// tryStart runs a job only in a slot free at once: never beyond the capacity or the workspace's
// share, and never ahead of the workspace's queued work.
func TestSlotsTryStartNeverQueues(t *testing.T) {
	s := newSlots(3, 2)
	release := make(chan struct{})
	started := make(chan string, 10)
	job := func(ws string) func() {
		return func() {
			started <- ws
			<-release
		}
	}
	for _, c := range []struct {
		ws   string
		want bool
	}{{"a", true}, {"a", true}, {"a", false}, {"b", true}, {"c", false}} {
		if got := s.tryStart(c.ws, job(c.ws)); got != c.want {
			t.Fatalf("tryStart(%s) = %v, want %v", c.ws, got, c.want)
		}
	}
	for range 3 {
		<-started
	}
	if q := s.queued(); q != 0 {
		t.Fatalf("tryStart queued %d jobs, want none", q)
	}
	// c queues behind the full slots; when one frees, c's queued job has it, and a later
	// tryStart for c does not overtake it.
	s.submit("c", job("c"))
	release <- struct{}{}
	if ws := <-started; ws != "c" {
		t.Fatalf("the freed slot went to %s, want c's queued job", ws)
	}
	if s.tryStart("c", job("c")) {
		t.Fatal("tryStart(c) started with every slot busy")
	}
	close(release)
}

// startWithin waits for a slot for at most its time: a job whose slot frees in time runs, one
// whose time runs out first never does, even once its queued place comes up.
func TestSlotsStartWithinWaitsItsTimeOnly(t *testing.T) {
	s := newSlots(2, 1)
	release := make(chan struct{})
	if !s.startWithin("a", func() { <-release }, time.Minute) {
		t.Fatal("startWithin did not start in a free slot")
	}
	// a holds its share: a second job of a can only wait.
	var late atomic.Bool
	if s.startWithin("a", func() { late.Store(true) }, time.Millisecond) {
		t.Fatal("startWithin started beyond the workspace's share")
	}
	ran := make(chan struct{})
	result := make(chan bool, 1)
	go func() { result <- s.startWithin("a", func() { close(ran) }, time.Minute) }()
	waitFor(t, "the second job to queue", func() bool { return s.queued() == 2 })
	close(release)
	if !<-result {
		t.Fatal("startWithin gave up though its slot freed in time")
	}
	<-ran
	waitFor(t, "the queue to drain", func() bool { return s.queued() == 0 })
	if late.Load() {
		t.Fatal("a job whose wait ran out ran when its place came up")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
