package main

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// benchRounds is a phase's charge rounds in every instance (the executor's round metrics):
// the section each execution passes through in turn, whose time and size show whether the
// service or the load is the bound (docs/performance.md, "Charge rounds").
type benchRounds struct {
	apps   []*app
	start  time.Time
	before roundTotals
}

// roundTotals are the instances' round series, summed.
type roundTotals struct {
	rounds, charges, seconds, turns, waited float64
}

func startBenchRounds(apps []*app) *benchRounds {
	return &benchRounds{apps: apps, start: time.Now(), before: sumRounds(apps)}
}

// end is the phase's rounds since start, as a line: rounds, their charges, time each, the share
// of the phase they took (summed over instances), and the turns they awaited.
func (r *benchRounds) end() string {
	wall := time.Since(r.start).Seconds()
	now := sumRounds(r.apps)
	rounds, turns := now.rounds-r.before.rounds, now.turns-r.before.turns
	if rounds == 0 {
		return "none"
	}
	seconds := now.seconds - r.before.seconds
	charges := now.charges - r.before.charges
	s := fmt.Sprintf("%.0f for %.0f charges (%.1f each), %.2f ms each, busy %.2f of the phase; %.0f turns awaited",
		rounds, charges, charges/rounds, 1000*seconds/rounds, seconds/wall, turns)
	if turns > 0 {
		s += fmt.Sprintf(", %.2f ms each", 1000*(now.waited-r.before.waited)/turns)
	}
	return s
}

func sumRounds(apps []*app) roundTotals {
	var t roundTotals
	for _, a := range apps {
		var n float64
		n, t.seconds = addHistogram(a.registry, "switchyard_executor_charge_round_seconds", t.seconds)
		t.rounds += n
		_, t.charges = addHistogram(a.registry, "switchyard_executor_charge_round_charges", t.charges)
		n, t.waited = addHistogram(a.registry, "switchyard_executor_charge_turn_wait_seconds", t.waited)
		t.turns += n
	}
	return t
}

// addHistogram reads a histogram of g's metrics: its observations, and its sum added to sum
// (0 and sum when absent).
func addHistogram(g prometheus.Gatherer, name string, sum float64) (float64, float64) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, sum
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			h := mf.GetMetric()[0].GetHistogram()
			return float64(h.GetSampleCount()), sum + h.GetSampleSum()
		}
	}
	return 0, sum
}
