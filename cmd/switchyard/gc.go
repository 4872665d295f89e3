package main

import (
	"runtime/debug"
)

// serviceGCPercent is the garbage collector's target for a process that serves: the heap may
// grow to five times what is live before a collection, where Go's default lets it double.
// The service's live heap is small (caches, connections, requests in flight) and almost
// everything it allocates dies within a request, so at the default the collector ran often
// enough to take about a seventh of the process's CPU under load; at 400, `bench e2e` ran
// about 5 % faster with 13 % less CPU in the process (docs/performance.md, round 11).
const serviceGCPercent = 400

// tuneGC sets serviceGCPercent unless the operator set GOGC, which always wins. GOMEMLIMIT,
// when set, still caps the heap: the runtime then collects earlier as the limit nears.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(serviceGCPercent)
}
