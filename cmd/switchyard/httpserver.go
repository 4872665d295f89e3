package main

import (
	"net/http"
	"time"
)

// headerTimeout bounds how long a client may take to send its request headers.
const headerTimeout = 10 * time.Second

// newHTTPServer is the service's HTTP server. A request, headers and body, must arrive within
// readTimeout (its headers within 10 s of that); responses have no deadline. ReadTimeout does
// not cut server-sent-event streams or long waits (waitForMs): net/http lifts the connection's
// read deadline once the body has been read to its end (TestLongResponsesOutliveTheReadTimeout).
func newHTTPServer(h http.Handler, readTimeout time.Duration) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: min(headerTimeout, readTimeout), ReadTimeout: readTimeout,
		IdleTimeout: 120 * time.Second}
}
