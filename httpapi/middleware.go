package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/domain"
)

type loggerKey struct{}

// LoggerFrom returns the request's logger, carrying its request id.
func LoggerFrom(ctx context.Context) logrus.FieldLogger {
	if l, ok := ctx.Value(loggerKey{}).(logrus.FieldLogger); ok {
		return l
	}
	return logrus.StandardLogger()
}

// WithLogger attaches a logger to ctx.
func WithLogger(ctx context.Context, l logrus.FieldLogger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// requestLog gives each request an id (X-Request-Id, echoed back) and logs its outcome. Only
// method, path and status are logged: never headers or bodies, which carry keys and secrets.
func requestLog(base logrus.FieldLogger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if _, err := uuid.Parse(id); err != nil {
			id = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", id)
		log := base.WithField("requestId", id)
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r.WithContext(WithLogger(r.Context(), log)))
		if !debugEnabled(log) {
			return // the fields below cost every request a map and an entry, for a line not written
		}
		log.WithFields(logrus.Fields{"method": r.Method, "path": loggedPath(r.URL.Path), "status": rec.status,
			"durationMs": time.Since(start).Milliseconds()}).Debug("request")
	})
}

// debugEnabled reports whether log writes debug lines; a logger of unknown kind is assumed to.
func debugEnabled(log logrus.FieldLogger) bool {
	switch l := log.(type) {
	case *logrus.Entry:
		return l.Logger.IsLevelEnabled(logrus.DebugLevel)
	case *logrus.Logger:
		return l.IsLevelEnabled(logrus.DebugLevel)
	}
	return true
}

// loggedPath is a request's path as the log may keep it: a hook's URL is its credential, so
// its token is left out.
func loggedPath(path string) string {
	if strings.HasPrefix(path, "/hooks/") {
		return "/hooks/{token}"
	}
	if rest, ok := strings.CutPrefix(path, "/approvals/"); ok && rest != "" {
		return "/approvals/…"
	}
	return path
}

// recoverPanics turns a handler panic into a 500 with the error body instead of a dropped
// connection, and logs it.
func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				LoggerFrom(r.Context()).WithField("panic", v).Error("handler panicked")
				WriteError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody bounds every request body; handlers see a read error past the limit.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			WriteError(w, http.StatusRequestEntityTooLarge, "request body exceeds the limit")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		next.ServeHTTP(w, r)
	})
}

// IsBodyTooLarge reports whether err came from reading past the body limit.
func IsBodyTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// refuseBadText keeps text PostgreSQL cannot store (NUL, invalid UTF-8) out of every handler, so
// no query or path lookup fails on it with a 500. A path holding it names nothing (ids are UUIDs,
// files ASCII): 404, as any unknown id. A query parameter holding it is a 400 naming it.
func refuseBadText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !storableText(r.URL.Path) {
			notFound(w, r)
			return
		}
		if name, ok := badQueryParameter(r.URL.RawQuery); ok {
			err := domain.Invalid(name, "must be UTF-8 text without NUL characters")
			writeRouteError(w, r, http.StatusBadRequest, err.Error(),
				fmt.Sprintf("The address's %s parameter is not text this service can read. Remove it and try again.", name))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// storableText: valid UTF-8 without NUL.
func storableText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// badQueryParameter is the first parameter, in the order sent, whose name or value is not
// storable text once unescaped; a name that is not itself text is quoted (and cut at 64
// bytes), so the message stays readable.
func badQueryParameter(raw string) (string, bool) {
	for pair := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue // skipped by url.ParseQuery, so by every handler
		}
		if storableText(name) && storableText(value) {
			continue
		}
		if !storableText(name) || len(name) > 64 {
			return fmt.Sprintf("%.64q", name), true
		}
		return name, true
	}
	return "", false
}
