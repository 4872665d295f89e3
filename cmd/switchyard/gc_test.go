package main

import (
	"runtime/debug"
	"testing"
)

// A serving process collects at serviceGCPercent unless GOGC says otherwise.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != serviceGCPercent {
		t.Errorf("GC percent %d without GOGC, want %d", got, serviceGCPercent)
	}
	tuneGC(func(name string) string {
		if name == "GOGC" {
			return "100"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d with GOGC=100, want the operator's 100", got)
	}
}
