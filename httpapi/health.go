package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard/switchyard/internal/dbfail"
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

// readyTimeout bounds the whole of one /readyz.
const readyTimeout = 3 * time.Second

// healthz answers 200 while the process serves requests.
func healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz runs every check (database, event store, projectors) with a deadline and answers 503
// naming the failing ones, with Retry-After. The endpoint needs no credentials, so a failure
// is told by its kind only (unavailable, timeout, failed); the error itself, which can name
// hosts, databases and users, goes to the log.
func readyz(checks []Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		results := make([]checkResult, 0, len(checks))
		ready := true
		for _, c := range checks {
			res := checkResult{Name: c.Name, OK: true}
			if err := c.Check(ctx); err != nil {
				res.OK, res.Error, ready = false, checkFailure(err), false
				LoggerFrom(r.Context()).WithError(err).WithField("check", c.Name).Warn("readiness check failed")
			}
			results = append(results, res)
		}
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", UnavailableRetryAfter)
		}
		WriteJSON(w, status, map[string]any{"ready": ready, "checks": results})
	}
}

// checkFailure is the kind of a failed check that /readyz shows.
func checkFailure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case dbfail.Unavailable(err):
		return "unavailable"
	default:
		return "failed"
	}
}

func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
