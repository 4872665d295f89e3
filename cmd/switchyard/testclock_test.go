package main

import (
	"strings"
	"testing"
	"time"
)

func TestTestClock(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func(t *testing.T, on bool) {
		was := testClockBuild
		testClockBuild = on
		t.Cleanup(func() { testClockBuild = was })
	}

	t.Run("unset is the wall clock, in any build", func(t *testing.T) {
		build(t, false)
		if c, err := loadTestClock(env(nil), start); c != nil || err != nil {
			t.Fatalf("got %v, %v", c, err)
		}
	})
	t.Run("a build that is not a test's refuses every variable, by name", func(t *testing.T) {
		build(t, false)
		for _, name := range []string{envTestClockStart, envTestClockOffset, envTestClockRate} {
			c, err := loadTestClock(env(map[string]string{name: "1"}), start)
			if c != nil || err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "test builds") {
				t.Fatalf("%s: got %v, %v", name, c, err)
			}
		}
	})
	t.Run("bad values are refused by name", func(t *testing.T) {
		build(t, true)
		for name, v := range map[string]string{envTestClockStart: "yesterday", envTestClockOffset: "1 hour",
			envTestClockRate: "0.5"} {
			c, err := loadTestClock(env(map[string]string{name: v}), start)
			if c != nil || err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%s: got %v, %v", name, v, c, err)
			}
		}
		// Behind the wall: a start after the process's, a negative offset.
		for name, v := range map[string]string{envTestClockStart: start.Add(time.Second).Format(time.RFC3339Nano),
			envTestClockOffset: "-1s"} {
			c, err := loadTestClock(env(map[string]string{name: v}), start)
			if c != nil || err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%s: got %v, %v", name, v, c, err)
			}
		}
		for _, v := range []string{"0", "-2", "1001", "NaN"} {
			if _, err := loadTestClock(env(map[string]string{envTestClockRate: v}), start); err == nil {
				t.Fatalf("rate %s accepted", v)
			}
		}
	})
	t.Run("offset and rate", func(t *testing.T) {
		build(t, true)
		c, err := loadTestClock(env(map[string]string{envTestClockOffset: "1h"}), start)
		if err != nil || c.Start != start || c.Offset != time.Hour || c.Rate != 1 {
			t.Fatalf("got %+v, %v", c, err)
		}
		from := start.Add(-time.Minute).Format(time.RFC3339Nano)
		c, err = loadTestClock(env(map[string]string{envTestClockStart: from, envTestClockOffset: "30s", envTestClockRate: "20"}), start)
		if err != nil || !c.Start.Equal(start.Add(-time.Minute)) || c.Offset != 30*time.Second || c.Rate != 20 {
			t.Fatalf("got %+v, %v", c, err)
		}
		// The clock reads start + offset + rate × (wall − start): checked with a start an hour
		// back, where the wall's advance during the check is small beside the rate's.
		c = &testClock{Start: time.Now().Add(-time.Hour), Offset: time.Minute, Rate: 3}
		want := c.Start.Add(3*time.Hour + time.Minute)
		if got := c.Now(); got.Before(want) || got.After(want.Add(time.Minute)) {
			t.Fatalf("Now %s, want %s (within a minute after)", got, want)
		}
	})
	t.Run("only a clock faster than the wall nudges", func(t *testing.T) {
		if (&testClock{Rate: 1, Offset: time.Hour}).nudges(t.Context()) != nil {
			t.Fatal("a clock at the wall's pace nudges")
		}
		select {
		case <-(&testClock{Rate: 20}).nudges(t.Context()):
		case <-time.After(10 * time.Second):
			t.Fatal("no nudge within 10s")
		}
	})
}
