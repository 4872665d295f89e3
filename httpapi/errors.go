// Package httpapi serves Switchyard's HTTP interface: the /v1 SDK and workspace routes, the
// health and metrics endpoints, and the error body every /v1 failure shares (SPEC.md 7).
package httpapi

import (
	"bytes"
	"html/template"
	"net/http"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/web/httperr"
)

// ErrorBody is the body of every non-2xx /v1 response (SPEC.md 7).
type ErrorBody = httperr.Body

// WriteError writes status with the SPEC.md 7 body.
func WriteError(w http.ResponseWriter, status int, message string) { httperr.Write(w, status, message) }

// WriteJSON writes v as the JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) { httperr.JSON(w, status, v) }

// WriteDomainError answers an error from commands or queries by the one mapping of
// httperr.Rules; anything unexpected is logged with the request's fields and answered 500
// without detail.
func WriteDomainError(w http.ResponseWriter, r *http.Request, err error) {
	httperr.WriteErr(w, LoggerFrom(r.Context()), err)
}

// UnavailableRetryAfter is the Retry-After of a 503 (httperr.UnavailableRetryAfter).
const UnavailableRetryAfter = httperr.UnavailableRetryAfter

// WriteUnavailable answers 503 with Retry-After: a dependency cannot be reached for now.
func WriteUnavailable(w http.ResponseWriter) { httperr.WriteUnavailable(w) }

// notFound answers unknown routes with the SPEC.md 7 body, or a page for a browser outside /v1.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeRouteError(w, r, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path,
		"There is no page at this address.")
}

// methodNotAllowed answers a known route called with the wrong method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeRouteError(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path,
		"This address does not take that kind of request.")
}

// writeRouteError answers a request refused before any handler: the SPEC.md 7 body, except to
// a browser asking for a page outside /v1 (Accept: text/html), which reads sentence in a page
// instead of raw JSON. /v1 answers JSON to everyone.
func writeRouteError(w http.ResponseWriter, r *http.Request, status int, message, sentence string) {
	if !wantsPage(r) {
		WriteError(w, status, message)
		return
	}
	var buf bytes.Buffer
	if err := errorPage.Execute(&buf, struct{ Heading, Message string }{http.StatusText(status), sentence}); err != nil {
		WriteError(w, status, message)
		return
	}
	httperr.HTML(w, status, "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'", buf.Bytes())
}

// wantsPage: a browser's navigation outside /v1 (its Accept names text/html; API clients send
// application/json or */*).
func wantsPage(r *http.Request) bool {
	if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// errorPage is the page of writeRouteError, in the sign-in pages' style sheet.
var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Heading}} · Switchyard</title>
<link rel="stylesheet" href="/static/identity.css">
</head>
<body>
<header class="top"><a class="brand" href="/"><span class="mark" aria-hidden="true">⇄</span> Switchyard</a></header>
<main class="card" id="main">
<h1>{{.Heading}}</h1>
<p class="lead" role="alert">{{.Message}}</p>
<p><a href="/">Back to the console</a></p>
</main>
</body>
</html>
`))

// logger returns a logger that never panics on a nil FieldLogger.
func logger(l logrus.FieldLogger) logrus.FieldLogger {
	if l == nil {
		return logrus.StandardLogger()
	}
	return l
}
