package config

import (
	"fmt"
	"strings"
)

// Var describes one environment variable. Vars is the single list that Load reads, the CLI prints
// for --help and docs/configuration.md shows (a test keeps the document in step).
type Var struct {
	Name        string
	Default     string // "" when there is none
	Description string
}

// EnvExecutorWorkspaceShare is the percentage of the executor's slots one workspace may hold.
const EnvExecutorWorkspaceShare = "SWITCHYARD_EXECUTOR_WORKSPACE_SHARE"

// Names of the environment variables.
const (
	EnvDatabaseURL         = "DATABASE_URL"
	EnvEventStore          = "SWITCHYARD_EVENT_STORE"
	EnvKurrentDBURL        = "KURRENTDB_URL"
	EnvListen              = "SWITCHYARD_LISTEN"
	EnvBaseURL             = "SWITCHYARD_BASE_URL"
	EnvSecretKey           = "SWITCHYARD_SECRET_KEY"
	EnvPreviousSecretKeys  = "SWITCHYARD_PREVIOUS_SECRET_KEYS"
	EnvDataDir             = "SWITCHYARD_DATA_DIR"
	EnvLogFormat           = "SWITCHYARD_LOG_FORMAT"
	EnvLogLevel            = "SWITCHYARD_LOG_LEVEL"
	EnvExecutorConcurrency = "SWITCHYARD_EXECUTOR_CONCURRENCY"
	EnvCacheWindow         = "SWITCHYARD_CACHE_WINDOW"
	EnvRateLimit           = "SWITCHYARD_RATE_LIMIT"
	EnvRateBurst           = "SWITCHYARD_RATE_BURST"
	EnvHookRateLimit       = "SWITCHYARD_HOOK_RATE_LIMIT"
	EnvHookRateBurst       = "SWITCHYARD_HOOK_RATE_BURST"
	EnvMaxStreamsPerKey    = "SWITCHYARD_MAX_STREAMS_PER_KEY"
	EnvWebhookAllowPrivate = "SWITCHYARD_WEBHOOK_ALLOW_PRIVATE"
	EnvWebhookCAFile       = "SWITCHYARD_WEBHOOK_CA_FILE"
	EnvSSEHeartbeat        = "SWITCHYARD_SSE_HEARTBEAT"
	EnvTaskLease           = "SWITCHYARD_TASK_LEASE"
	EnvMaxBodyBytes        = "SWITCHYARD_MAX_BODY_BYTES"
	EnvShutdownTimeout     = "SWITCHYARD_SHUTDOWN_TIMEOUT"
	EnvReadTimeout         = "SWITCHYARD_READ_TIMEOUT"
	EnvPasswordChecks      = "SWITCHYARD_PASSWORD_CHECKS"
)

// Vars lists every variable with its default, in the order --help and the docs show them.
var Vars = []Var{
	{EnvDatabaseURL, "postgres://postgres@127.0.0.1:5432/switchyard?sslmode=disable",
		"PostgreSQL connection URL (or key=value string) for the read models, and for the events when the event store is postgres. Unset: the database scripts/run.sh recorded for this checkout in .data/database.env (looked for in the working directory, then above the binary's directory), else this default."},
	{EnvEventStore, "postgres",
		"Event store backend: postgres (the events table in DATABASE_URL) or kurrentdb."},
	{EnvKurrentDBURL, "",
		"KurrentDB connection string, required when SWITCHYARD_EVENT_STORE=kurrentdb, e.g. esdb://localhost:2113?tls=false."},
	{EnvListen, ":8080",
		"Address the HTTP server listens on, host:port (an empty host listens on every interface)."},
	{EnvBaseURL, "http://localhost:8080",
		"Public URL clients reach the service at (OpenID issuer, links); http or https, a trailing slash is removed."},
	{EnvSecretKey, "",
		"Base64 of 32 random bytes (openssl rand -base64 32): the AES-256-GCM key that seals secrets inside events. Unset: a key is generated in SWITCHYARD_DATA_DIR/secret.key with a warning; production must set it."},
	{EnvPreviousSecretKeys, "",
		"Comma-separated older secret keys (base64), used only to open secrets sealed before a key rotation."},
	{EnvDataDir, "./data",
		"Directory for local state, such as the generated secret key when SWITCHYARD_SECRET_KEY is unset."},
	{EnvLogFormat, "text",
		"Log format: text (for people) or json (for production log collection)."},
	{EnvLogLevel, "info",
		"Log level: trace, debug, info, warn, error, fatal or panic."},
	{EnvExecutorConcurrency, "64",
		"Maximum number of component executions one process runs at the same time."},
	{EnvExecutorWorkspaceShare, "50",
		"Percentage (1 to 100) of SWITCHYARD_EXECUTOR_CONCURRENCY that one workspace's executions may hold at once; the rest of its work waits in its own queue, and free slots go to workspaces in turn, so one workspace's backlog cannot starve another's calls."},
	{EnvCacheWindow, "10m",
		"How long an identical call in a workspace is free after the first (Go duration); 0 disables the cache."},
	{EnvRateLimit, "50",
		"Sustained requests per second allowed per API key."},
	{EnvRateBurst, "100",
		"Requests per API key allowed in a burst above the sustained rate."},
	{EnvHookRateLimit, "10",
		"Sustained deliveries per second allowed per inbound webhook (POST /hooks/{token}), per process."},
	{EnvHookRateBurst, "50",
		"Deliveries per inbound webhook allowed in a burst above the sustained rate."},
	{EnvMaxStreamsPerKey, "100",
		"Server-sent-event streams (execution and run streams together) one API key may hold open at once, per process; past it a stream is answered 429."},
	{EnvWebhookAllowPrivate, "false",
		"Allow webhook deliveries and http.request calls to reach private, loopback or link-local addresses, turning the SSRF guard off for both (local development and tests only)."},
	{EnvWebhookCAFile, "",
		"PEM file of extra CA certificates trusted for webhook HTTPS, in addition to the system roots."},
	{EnvSSEHeartbeat, "15s",
		"Interval of keep-alive comments on server-sent-event streams (Go duration)."},
	{EnvTaskLease, "30s",
		"How long a worker's lease of a task (an attempt of a workspace module with a worker transport) lasts unless a heartbeat renews it; an attempt whose lease runs out fails with lease_expired (Go duration)."},
	{EnvMaxBodyBytes, "1MiB",
		"Largest request body accepted, in bytes or with a unit (KiB, MiB, GiB, KB, MB, GB)."},
	{EnvShutdownTimeout, "30s",
		"On SIGTERM, how long to let in-flight requests and executions finish before stopping (Go duration)."},
	{EnvReadTimeout, "30s",
		"How long a client may take to send a whole request, headers (at most 10 s of it) and body (Go duration); a slower client is disconnected. Responses, server-sent-event streams and waits are not limited by it."},
	{EnvPasswordChecks, "4",
		"Maximum number of sign-in password checks (argon2id, 64 MiB each) running at once; a sign-in that finds no free slot within 5 s is answered 503 with Retry-After."},
}

// Lookup returns the Var named name.
func Lookup(name string) (Var, bool) {
	for _, v := range Vars {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// Usage is the environment section of the CLI's --help text, wrapped to 80 columns.
func Usage() string {
	var b strings.Builder
	b.WriteString("Environment variables:\n")
	for _, v := range Vars {
		def := v.Default
		if def == "" {
			def = "(none)"
		}
		b.WriteString("  " + v.Name + "\n")
		for _, line := range wrap(v.Description, 72) {
			b.WriteString("      " + line + "\n")
		}
		b.WriteString("      default: " + def + "\n")
	}
	return b.String()
}

// wrap breaks text into lines of at most width bytes at spaces (a longer word stands alone).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Markdown is the configuration table of docs/configuration.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Description |\n|---|---|---|\n")
	for _, v := range Vars {
		def := "(none)"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, strings.ReplaceAll(v.Description, "|", `\|`))
	}
	return b.String()
}
