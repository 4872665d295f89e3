package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// ServerConfig configures the HTTP interface.
type ServerConfig struct {
	// Logger receives the request log and internal failures; default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Gatherer serves /metrics; nil leaves /metrics out.
	Gatherer prometheus.Gatherer
	// Checks are what /readyz runs.
	Checks []Check
	// MaxBodyBytes bounds every request body. Default 1 MiB.
	MaxBodyBytes int64
}

// setDefaults fills zero values and repairs a negative MaxBodyBytes with the default, so that
// NewServer, which returns no error, always gets a valid config.
func (c *ServerConfig) setDefaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	c.Logger = logger(c.Logger)
}

// Validate reports a field out of range, by name. Zero values are valid: they take the default.
func (c ServerConfig) Validate() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("httpapi: MaxBodyBytes %d: must not be negative", c.MaxBodyBytes)
	}
	return nil
}

// Server is the service's HTTP handler. Feature routes are mounted on V1 by their packages.
type Server struct {
	Router *mux.Router
	// V1 is the /v1 subrouter; every error under it has the SPEC.md 7 body.
	V1   *mux.Router
	opts ServerConfig
}

// NewServer builds the router with the health, readiness and metrics endpoints. It calls
// opts.setDefaults, which repairs what Validate would refuse, so it needs no error result.
func NewServer(opts ServerConfig) *Server {
	opts.setDefaults()
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

// Logger is where the server's handlers log (ServerConfig.Logger).
func (s *Server) Logger() logrus.FieldLogger { return s.opts.Logger }

// Handler returns the full handler chain.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.Router
	h = refuseBadText(h)
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
