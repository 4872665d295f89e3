package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness dependency: nil when healthy.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

type checkResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// healthz answers 200 while the process serves requests.
func healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz runs every check (database, event store, projectors) with a deadline and answers 503
// naming the failing ones.
func readyz(checks []Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		results := make([]checkResult, 0, len(checks))
		ready := true
		for _, c := range checks {
			res := checkResult{Name: c.Name, OK: true}
			if err := c.Check(ctx); err != nil {
				res.OK, res.Error, ready = false, err.Error(), false
			}
			results = append(results, res)
		}
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
		}
		WriteJSON(w, status, map[string]any{"ready": ready, "checks": results})
	}
}

func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
