package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The test clock (docs/configuration.md, "The test clock"): the black-box tests of this package
// move the clock of the binary they start, which is another process, through the environment.
// Only a test build honours it (testClockBuild, set by testclock_build.go under the build tag
// switchyard_testclock, which the tests build with); any other build refuses to start when
// one of these variables is set, so a production binary can never run on a moved clock.
const (
	envTestClockStart  = "SWITCHYARD_TEST_CLOCK_START"
	envTestClockOffset = "SWITCHYARD_TEST_CLOCK_OFFSET"
	envTestClockRate   = "SWITCHYARD_TEST_CLOCK_RATE"
)

// testClockBuild reports a test build (testclock_build.go).
var testClockBuild bool

// maxTestClockRate bounds SWITCHYARD_TEST_CLOCK_RATE: faster, the wall-clock timers the clock
// does not scale (leases, sweeps) would be far behind it.
const maxTestClockRate = 1000

// testClockNudge is how often, in wall time, a clock running faster than the wall tells the
// schedules reactor to look at what is due: its timer waits wall time.
const testClockNudge = 10 * time.Millisecond

// testClock reads start + offset + rate × (wall − start): Offset moves it, Rate speeds it up
// from Start. Two processes given the same three values read the same time. It never reads
// behind the wall (Start is not after the process's start, Offset and Rate-1 are not
// negative): what the service decides by it and something else checks by the wall clock (a
// session's end, checked by the identity provider) then ends late, never early.
type testClock struct {
	// Start is the wall time the clock reads Start+Offset at; default the process's start.
	Start time.Time
	// Offset is added to the wall clock.
	Offset time.Duration
	// Rate is how many times faster than the wall the clock runs; default 1.
	Rate float64
}

// loadTestClock reads the test clock from the environment: nil when none of its variables is
// set; an error naming the variable when one is bad, or set in a build that is not a test's.
func loadTestClock(getenv func(string) string, now time.Time) (*testClock, error) {
	set := []string{}
	for _, name := range []string{envTestClockStart, envTestClockOffset, envTestClockRate} {
		if getenv(name) != "" {
			set = append(set, name)
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	if !testClockBuild {
		return nil, fmt.Errorf("%s: the test clock is honoured only by test builds (go build -tags switchyard_testclock), "+
			"never by a service: unset it", strings.Join(set, ", "))
	}
	c := &testClock{Start: now, Rate: 1}
	if v := getenv(envTestClockStart); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.After(now) {
			return nil, fmt.Errorf("%s: %q is not an RFC 3339 time before the process's start", envTestClockStart, v)
		}
		c.Start = t
	}
	if v := getenv(envTestClockOffset); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s: %q is not a Go duration of at least 0 (for example 1h or 90s)", envTestClockOffset, v)
		}
		c.Offset = d
	}
	if v := getenv(envTestClockRate); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r >= 1 && r <= maxTestClockRate) {
			return nil, fmt.Errorf("%s: %q is not a factor from 1 to %d", envTestClockRate, v, maxTestClockRate)
		}
		c.Rate = r
	}
	return c, nil
}

// Now is the clock's time.
func (c *testClock) Now() time.Time {
	elapsed := time.Since(c.Start)
	return c.Start.Add(c.Offset + time.Duration(float64(elapsed)*c.Rate))
}

// After waits d on the clock (d/Rate of wall time).
func (c *testClock) After(d time.Duration) <-chan time.Time {
	return time.After(time.Duration(float64(d) / c.Rate))
}

// nudges, for a clock faster than the wall, ticks every testClockNudge until ctx ends, dropping
// ticks nobody takes; nil (never) for a clock at the wall's pace, whose wall-time timers ring
// on time.
func (c *testClock) nudges(ctx context.Context) <-chan struct{} {
	if c.Rate == 1 {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		tick := time.NewTicker(testClockNudge)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch
}

// String describes the clock for the start-up warning.
func (c *testClock) String() string {
	return fmt.Sprintf("start %s, offset %s, rate %g", c.Start.UTC().Format(time.RFC3339Nano), c.Offset, c.Rate)
}
