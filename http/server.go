package httpapi

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Options configures the HTTP interface.
type Options struct {
	Logger       logrus.FieldLogger
	Gatherer     prometheus.Gatherer
	Checks       []Check
	MaxBodyBytes int64
}

// Server is the service's HTTP handler. Feature routes are mounted on V1 by their packages.
type Server struct {
	Router *mux.Router
	// V1 is the /v1 subrouter; every error under it has the SPEC.md 7 body.
	V1   *mux.Router
	opts Options
}

// NewServer builds the router with the health, readiness and metrics endpoints.
func NewServer(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	opts.Logger = logger(opts.Logger)
	r := mux.NewRouter()
	r.NotFoundHandler = unmatched(r)
	r.MethodNotAllowedHandler = http.HandlerFunc(methodNotAllowed)
	r.HandleFunc("/healthz", healthz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", readyz(opts.Checks)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/openapi.json", serveOpenAPI).Methods(http.MethodGet, http.MethodHead)
	if opts.Gatherer != nil {
		r.Handle("/metrics", metricsHandler(opts.Gatherer)).Methods(http.MethodGet)
	}
	v1 := r.PathPrefix("/v1").Subrouter()
	v1.MethodNotAllowedHandler = http.HandlerFunc(methodNotAllowed)
	return &Server{Router: r, V1: v1, opts: opts}
}

// Handler returns the full handler chain.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.Router
	h = limitBody(s.opts.MaxBodyBytes, h)
	h = recoverPanics(h)
	return requestLog(s.opts.Logger, h)
}

// probeMethods are the methods tried to tell a wrong method from an unknown path.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// unmatched answers a request no route took: 405 with Allow when the path exists for other
// methods, else 404. gorilla/mux reports a method mismatch as not found once any later route
// fails to match the path, so the router is asked again with each method instead.
func unmatched(r *mux.Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var allowed []string
		for _, m := range probeMethods {
			probe := req.Clone(req.Context())
			probe.Method = m
			var match mux.RouteMatch
			if m != req.Method && r.Match(probe, &match) && match.MatchErr == nil {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) == 0 {
			notFound(w, req)
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		methodNotAllowed(w, req)
	})
}
