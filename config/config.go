// Package config reads Switchyard's configuration from environment variables (DESIGN.md section
// 7). Every variable has a default that runs on a developer machine; Load validates them all and
// reports every bad one at once, each error naming its variable.
package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/seal"
)

// EventStore names an event store backend.
type EventStore string

// The event store backends.
const (
	EventStorePostgres  EventStore = "postgres"
	EventStoreKurrentDB EventStore = "kurrentdb"
)

// Log formats.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Secret is configuration text that must not be printed: it formats as "[redacted]" (or "" when
// empty) under every fmt verb and in logs. Reveal returns the value.
type Secret string

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the value for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalText hides the value in JSON and text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Config is the validated configuration. See Vars for what each field means.
type Config struct {
	DatabaseURL string
	// DatabaseURLFile is the checkout's DatabaseFile that DatabaseURL came from, when
	// DATABASE_URL was unset (FromEnvironment); "" otherwise.
	DatabaseURLFile     string
	EventStore          EventStore
	KurrentDBURL        string // set when EventStore is kurrentdb
	Listen              string
	BaseURL             string // no trailing slash
	SecretKey           Secret // base64 text, validated; empty: use or create DataDir/secret.key
	PreviousSecretKeys  []Secret
	DataDir             string
	LogFormat           string // LogFormatText or LogFormatJSON
	LogLevel            logrus.Level
	ExecutorConcurrency int
	ExecutorShare       int           // percent of ExecutorConcurrency one workspace may hold
	CacheWindow         time.Duration // 0 disables the cache
	RateLimit           float64       // requests per second per API key
	RateBurst           int
	HookRateLimit       float64 // deliveries per second per inbound webhook
	HookRateBurst       int
	MaxStreamsPerKey    int // open SSE streams per API key
	WebhookAllowPrivate bool
	WebhookCAFile       string
	WebhookCAs          *x509.CertPool // nil unless WebhookCAFile is set: system roots plus the file's certificates
	SSEHeartbeat        time.Duration
	TaskLease           time.Duration // how long a worker's lease of a task lasts unrenewed
	MaxBodyBytes        int64
	ShutdownTimeout     time.Duration
	ReadTimeout         time.Duration
	PasswordChecks      int
}

// Error is one invalid variable.
type Error struct {
	Var    string
	Reason string
}

func (e *Error) Error() string { return e.Var + ": " + e.Reason }

// Errors is every invalid variable Load found.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return "invalid configuration:\n  " + strings.Join(lines, "\n  ")
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Load reads the configuration through getenv (os.Getenv in production). An empty or blank value
// counts as unset and takes the default. The error, if any, is Errors, naming every bad variable;
// it never repeats a secret or a database password.
func Load(getenv func(string) string) (Config, error) {
	l := loader{getenv: getenv}
	var c Config

	c.DatabaseURL = l.databaseURL(EnvDatabaseURL)
	c.EventStore = EventStore(l.oneOf(EnvEventStore, string(EventStorePostgres), string(EventStoreKurrentDB)))
	if c.EventStore == EventStoreKurrentDB {
		c.KurrentDBURL = l.kurrentURL(EnvKurrentDBURL)
	}
	c.Listen = l.listen(EnvListen)
	c.BaseURL = l.baseURL(EnvBaseURL)
	c.SecretKey, c.PreviousSecretKeys = l.secretKeys(EnvSecretKey, EnvPreviousSecretKeys)
	c.DataDir = l.get(EnvDataDir)
	c.LogFormat = l.oneOf(EnvLogFormat, LogFormatText, LogFormatJSON)
	c.LogLevel = l.logLevel(EnvLogLevel)
	c.ExecutorConcurrency = l.intIn(EnvExecutorConcurrency, 1, 100_000)
	c.ExecutorShare = l.intIn(EnvExecutorWorkspaceShare, 1, 100)
	c.CacheWindow = l.duration(EnvCacheWindow, true)
	c.RateLimit = l.positiveFloat(EnvRateLimit)
	c.RateBurst = l.intIn(EnvRateBurst, 1, 1_000_000_000)
	c.HookRateLimit = l.positiveFloat(EnvHookRateLimit)
	c.HookRateBurst = l.intIn(EnvHookRateBurst, 1, 1_000_000_000)
	c.MaxStreamsPerKey = l.intIn(EnvMaxStreamsPerKey, 1, 1_000_000)
	c.WebhookAllowPrivate = l.boolean(EnvWebhookAllowPrivate)
	c.WebhookCAFile, c.WebhookCAs = l.caFile(EnvWebhookCAFile)
	c.SSEHeartbeat = l.duration(EnvSSEHeartbeat, false)
	c.TaskLease = l.duration(EnvTaskLease, false)
	c.MaxBodyBytes = l.size(EnvMaxBodyBytes)
	c.ShutdownTimeout = l.duration(EnvShutdownTimeout, false)
	c.ReadTimeout = l.duration(EnvReadTimeout, false)
	c.PasswordChecks = l.intIn(EnvPasswordChecks, 1, 1024)

	if len(l.errs) > 0 {
		return Config{}, l.errs
	}
	return c, nil
}

// FromEnvironment is Load(os.Getenv), except that an unset DATABASE_URL is taken from the
// checkout's recorded database (RecordedDatabase, looked for in the working directory, then
// above the binary's directory) before the default applies.
func FromEnvironment() (Config, error) {
	getenv, file := os.Getenv, ""
	if strings.TrimSpace(os.Getenv(EnvDatabaseURL)) == "" {
		url, path, ok, err := RecordedDatabase(checkoutDirs()...)
		if err != nil {
			return Config{}, Errors{{Var: EnvDatabaseURL, Reason: "unset, and this checkout's record of its database is unusable: " + err.Error()}}
		}
		if ok {
			getenv, file = withDatabaseURL(os.Getenv, url), path
		}
	}
	c, err := Load(getenv)
	c.DatabaseURLFile = file
	return c, err
}

// Sealer returns the sealer for secrets in events: SecretKey (or the generated key file in DataDir,
// which logs a warning) to seal, plus PreviousSecretKeys to open older values.
func (c Config) Sealer(logger logrus.FieldLogger) (*seal.Sealer, error) {
	current, err := seal.LoadOrCreateKey(c.DataDir, c.SecretKey.Reveal(), logger)
	if err != nil {
		return nil, err
	}
	previous := make([][]byte, 0, len(c.PreviousSecretKeys))
	for i, text := range c.PreviousSecretKeys {
		key, err := seal.DecodeKey(text.Reveal())
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", EnvPreviousSecretKeys, i+1, err)
		}
		previous = append(previous, key)
	}
	return seal.New(current, previous...)
}

// NewLogger returns a logrus logger writing to w with the configured format and level.
func (c Config) NewLogger(w io.Writer) *logrus.Logger {
	logger := logrus.New()
	logger.SetOutput(w)
	logger.SetLevel(c.LogLevel)
	if c.LogFormat == LogFormatJSON {
		logger.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano})
	} else {
		logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339})
	}
	return logger
}

// LogFields describes the configuration for a startup log line, with the database password
// removed and secrets reported only as set or not.
func (c Config) LogFields() logrus.Fields {
	f := logrus.Fields{
		"database":            redactDSN(c.DatabaseURL),
		"eventStore":          string(c.EventStore),
		"listen":              c.Listen,
		"baseURL":             c.BaseURL,
		"secretKeySet":        c.SecretKey != "",
		"previousSecretKeys":  len(c.PreviousSecretKeys),
		"dataDir":             c.DataDir,
		"logFormat":           c.LogFormat,
		"logLevel":            c.LogLevel.String(),
		"executorConcurrency": c.ExecutorConcurrency,
		"cacheWindow":         c.CacheWindow.String(),
		"rateLimit":           c.RateLimit,
		"rateBurst":           c.RateBurst,
		"hookRateLimit":       c.HookRateLimit,
		"hookRateBurst":       c.HookRateBurst,
		"maxStreamsPerKey":    c.MaxStreamsPerKey,
		"webhookAllowPrivate": c.WebhookAllowPrivate,
		"sseHeartbeat":        c.SSEHeartbeat.String(),
		"taskLease":           c.TaskLease.String(),
		"maxBodyBytes":        c.MaxBodyBytes,
		"shutdownTimeout":     c.ShutdownTimeout.String(),
		"readTimeout":         c.ReadTimeout.String(),
		"passwordChecks":      c.PasswordChecks,
	}
	if c.EventStore == EventStoreKurrentDB {
		f["kurrentdb"] = redactDSN(c.KurrentDBURL)
	}
	if c.WebhookCAFile != "" {
		f["webhookCAFile"] = c.WebhookCAFile
	}
	return f
}

// loader reads variables and collects every error.
type loader struct {
	getenv func(string) string
	errs   Errors
}

func (l *loader) fail(name, format string, args ...any) {
	l.errs = append(l.errs, &Error{Var: name, Reason: fmt.Sprintf(format, args...)})
}

// get returns the trimmed value, or the default from Vars when unset or blank.
func (l *loader) get(name string) string {
	if v := strings.TrimSpace(l.getenv(name)); v != "" {
		return v
	}
	v, ok := Lookup(name)
	if !ok {
		panic("config: variable " + name + " is missing from Vars")
	}
	return v.Default
}

func (l *loader) oneOf(name string, allowed ...string) string {
	v := strings.ToLower(l.get(name))
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	l.fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
	return allowed[0]
}

func (l *loader) databaseURL(name string) string {
	v := l.get(name)
	scheme, _, isURL := strings.Cut(v, "://")
	switch {
	case isURL && scheme != "postgres" && scheme != "postgresql":
		l.fail(name, "scheme %q is not postgres:// or postgresql://", scheme)
	case isURL:
		// url.Parse errors repeat the URL, password included; keep them out of the message.
		if _, err := url.Parse(v); err != nil {
			l.fail(name, "not a valid URL (expected postgres://user:password@host:5432/switchyard?sslmode=disable)")
		}
	case !strings.Contains(v, "="):
		l.fail(name, "not a PostgreSQL URL (postgres://user:password@host:5432/switchyard?sslmode=disable) or key=value connection string")
	}
	return v
}

func (l *loader) kurrentURL(name string) string {
	v := strings.TrimSpace(l.getenv(name))
	if v == "" {
		l.fail(name, "required when %s=%s (for example esdb://localhost:2113?tls=false)", EnvEventStore, EventStoreKurrentDB)
		return ""
	}
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok || (scheme != "esdb" && scheme != "esdb+discover") || rest == "" {
		l.fail(name, "must be esdb://host:port[?options] or esdb+discover://host:port[?options]")
	}
	return v
}

func (l *loader) listen(name string) string {
	v := l.get(name)
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		l.fail(name, "%q is not host:port (for example :8080 or 127.0.0.1:8080)", v)
		return v
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		l.fail(name, "port %q is not a number from 0 to 65535", port)
	}
	return v
}

func (l *loader) baseURL(name string) string {
	v := strings.TrimRight(l.get(name), "/")
	u, err := url.Parse(v)
	switch {
	case err != nil:
		l.fail(name, "%q is not a URL", v)
	case u.Scheme != "http" && u.Scheme != "https":
		l.fail(name, "%q must start with http:// or https://", v)
	case u.Host == "" || u.Hostname() == "":
		l.fail(name, "%q has no host", v)
	case u.User != nil:
		l.fail(name, "must not contain a user name or password")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?") || strings.Contains(v, "#"):
		l.fail(name, "%q must not have a query or fragment", v)
	}
	return v
}

func (l *loader) secretKeys(currentName, previousName string) (Secret, []Secret) {
	current := strings.TrimSpace(l.getenv(currentName))
	if current != "" {
		if _, err := seal.DecodeKey(current); err != nil {
			l.fail(currentName, "%v", err)
		}
	}
	var previous []Secret
	raw := strings.FieldsFunc(l.getenv(previousName), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
	for i, text := range raw {
		if _, err := seal.DecodeKey(text); err != nil {
			l.fail(previousName, "key %d: %v", i+1, err)
			continue
		}
		previous = append(previous, Secret(text))
	}
	return Secret(current), previous
}

func (l *loader) logLevel(name string) logrus.Level {
	v := l.get(name)
	level, err := logrus.ParseLevel(v)
	if err != nil {
		l.fail(name, "%q is not one of trace, debug, info, warn, error, fatal, panic", v)
		return logrus.InfoLevel
	}
	return level
}

func (l *loader) intIn(name string, lo, hi int) int {
	v := l.get(name)
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil {
		l.fail(name, "%q is not a whole number", v)
		return lo
	}
	if n < lo || n > hi {
		l.fail(name, "%d is out of range %d to %d", n, lo, hi)
	}
	return n
}

func (l *loader) positiveFloat(name string) float64 {
	v := l.get(name)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		l.fail(name, "%q is not a number", v)
		return 0
	}
	if f <= 0 {
		l.fail(name, "%v must be greater than 0", f)
	}
	return f
}

func (l *loader) duration(name string, zeroOK bool) time.Duration {
	v := l.get(name)
	d, err := time.ParseDuration(v)
	if err != nil {
		if _, numErr := strconv.ParseFloat(v, 64); numErr == nil {
			l.fail(name, "%q has no unit; write a Go duration such as %ss or %sms", v, v, v)
		} else {
			l.fail(name, "%q is not a duration (write a Go duration such as 10m, 90s or 1h30m)", v)
		}
		return 0
	}
	switch {
	case d < 0:
		l.fail(name, "%s must not be negative", v)
	case d == 0 && !zeroOK:
		l.fail(name, "must be greater than 0")
	}
	return d
}

func (l *loader) boolean(name string) bool {
	v := l.get(name)
	switch strings.ToLower(v) {
	case "1", "t", "true", "yes", "y", "on":
		return true
	case "0", "f", "false", "no", "n", "off":
		return false
	}
	l.fail(name, "%q is not a boolean (true or false)", v)
	return false
}

func (l *loader) caFile(name string) (string, *x509.CertPool) {
	path := strings.TrimSpace(l.getenv(name))
	if path == "" {
		return "", nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		l.fail(name, "cannot read %s: %v", path, err)
		return path, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		l.fail(name, "%s holds no PEM certificate", path)
		return path, nil
	}
	return path, pool
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first, so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

func (l *loader) size(name string) int64 {
	v := l.get(name)
	n, ok := parseSize(v)
	if !ok {
		l.fail(name, "%q is not a size (bytes, or a number with KiB, MiB, GiB, KB, MB or GB)", v)
		return 0
	}
	if n <= 0 {
		l.fail(name, "must be greater than 0")
	}
	return n
}

func parseSize(v string) (int64, bool) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// UnknownVars returns the names in environ (os.Environ's "NAME=value" form) that start with
// SWITCHYARD_ but are not in Vars: most likely misspelt, so the service can warn about them.
// SWITCHYARD_PG_* and SWITCHYARD_TEST_* belong to the scripts and tests, not the service.
func UnknownVars(environ []string) []string {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SWITCHYARD_") && !strings.HasPrefix(name, "SWITCHYARD_PG_") &&
			!strings.HasPrefix(name, "SWITCHYARD_TEST_") {
			if _, ok := Lookup(name); !ok {
				unknown = append(unknown, name)
			}
		}
	}
	return unknown
}

// redactDSN removes a password from a URL or key=value connection string.
func redactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable URL)"
		}
		return u.Redacted()
	}
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			fields[i] = k + "=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}
