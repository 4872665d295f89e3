// Package webhooks is the webhook dispatcher (SPEC.md 6.1, DESIGN.md section 5): it delivers
// the terminal execution record to the execution's callbackUrl, signed when a callbackSecret was
// given, and retries with exponential backoff and jitter.
//
// Every attempt is a pair of events on the execution stream (domain/execution/delivery.go). An
// instance claims an attempt by appending WebhookAttemptStarted at the exact revision it read,
// so two instances never send the same attempt; the claim's lease lets another instance take
// the attempt over, with the same x-delivery-id, when its holder died between sending and
// recording (at-least-once delivery; receivers de-duplicate on the id).
//
// Work arrives from a live subscription to terminal events and replay requests, from in-process
// timers for due retries, and from a periodic sweep of the webhook_deliveries read model, which
// recovers what a crashed or stopped instance left behind.
package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/configcheck"
	"github.com/switchyard/switchyard/internal/decoded"
	"github.com/switchyard/switchyard/modules/netguard"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/feed"
	"github.com/switchyard/switchyard/seal"
)

// The SPEC.md 6.1 header names and values.
const (
	HeaderDeliveryID         = "x-delivery-id"
	HeaderEvent              = "x-event"
	HeaderSignatureVersion   = "x-signature-version"
	HeaderSignatureTimestamp = "x-signature-timestamp"
	HeaderSignature          = "x-signature"
	EventTerminal            = "component.execution.terminal"
	SignatureVersion         = "v1"
	// TimestampFormat is the ISO 8601 form of x-signature-timestamp (UTC, milliseconds).
	TimestampFormat = "2006-01-02T15:04:05.000Z07:00"
	// UserAgent names the service on every delivery.
	UserAgent = "Switchyard-Webhooks/1 (+https://github.com/switchyard/switchyard)"
)

// Defaults of Config; docs/webhooks.md describes the schedule.
const (
	DefaultTimeout       = 10 * time.Second
	DefaultRetryBase     = 5 * time.Second
	DefaultRetryFactor   = 6
	DefaultMaxRetryDelay = 10 * time.Minute
	maxResponseDrain     = 64 << 10
)

// Config configures a Dispatcher.
type Config struct {
	// Worker names this process in claims; default host name and a random suffix.
	Worker string
	// Concurrency bounds the deliveries in flight in this process. Default 32.
	Concurrency int
	// Timeout bounds one request, connection included. Default 10s.
	Timeout time.Duration
	// RetryBase is the wait after a round's first failed attempt; each further wait is
	// RetryFactor times the one before; each is jittered ±20%. Defaults 5s and 6.
	RetryBase   time.Duration
	RetryFactor int
	// MaxRetryDelay caps how long a Retry-After (on 429 or 503) can push a retry. Default 10m.
	MaxRetryDelay time.Duration
	// LeaseMargin is added to Timeout to make an attempt's lease. Default 5s.
	LeaseMargin time.Duration
	// SweepInterval is how often the read model is searched for deliveries the live path
	// missed; SweepGrace is how long a due delivery waits for the live path first. Defaults 1s, 2s.
	SweepInterval time.Duration
	SweepGrace    time.Duration
	// AllowPrivate turns the SSRF guard off (SWITCHYARD_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// RootCAs are the trusted CAs (SWITCHYARD_WEBHOOK_CA_FILE); nil: the system roots.
	RootCAs *x509.CertPool
	// Client replaces the HTTP client built from AllowPrivate and RootCAs (benchmarks).
	Client *http.Client
	// Logger receives delivery failures; default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Now is the clock of leases, retries and signature timestamps; default time.Now.
	Now func() time.Time
}

// Dispatcher delivers terminal webhooks.
type Dispatcher struct {
	cmds    *commands.Commands
	store   eventstore.Store
	queries *projections.Queries
	sealer  *seal.Sealer
	client  *http.Client
	opts    Config
	log     logrus.FieldLogger
	slots   chan struct{}
	ready   chan struct{}

	mu       sync.Mutex
	inflight map[string]bool
	timers   map[string]*time.Timer
	stopped  bool
	wg       sync.WaitGroup
}

// setDefaults fills zero values and repairs negative ones with the default, so that New,
// which returns no error, always gets a valid Config.
func (c *Config) setDefaults() {
	if c.Worker == "" {
		host, _ := os.Hostname()
		c.Worker = fmt.Sprintf("%s-%s", host, uuid.NewString()[:8])
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.RetryFactor <= 0 {
		c.RetryFactor = DefaultRetryFactor
	}
	configcheck.SetDefaults(c.durations(), true)
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c Config) Validate() error {
	switch {
	case c.Concurrency < 0:
		return fmt.Errorf("webhooks: Concurrency %d: must be at least 1 (0 takes the default)", c.Concurrency)
	case c.RetryFactor < 0:
		return fmt.Errorf("webhooks: RetryFactor %d: must be at least 1 (0 takes the default)", c.RetryFactor)
	}
	return configcheck.NotNegative("webhooks", c.durations())
}

func (c *Config) durations() []configcheck.Duration {
	return []configcheck.Duration{{Name: "Timeout", Value: &c.Timeout, Default: DefaultTimeout},
		{Name: "RetryBase", Value: &c.RetryBase, Default: DefaultRetryBase},
		{Name: "MaxRetryDelay", Value: &c.MaxRetryDelay, Default: DefaultMaxRetryDelay},
		{Name: "LeaseMargin", Value: &c.LeaseMargin, Default: 5 * time.Second},
		{Name: "SweepInterval", Value: &c.SweepInterval, Default: time.Second},
		{Name: "SweepGrace", Value: &c.SweepGrace, Default: 2 * time.Second}}
}

// New returns a dispatcher following store and issuing cmds' Webhooks; Run starts it. It calls
// opts.setDefaults, which repairs what Validate would refuse, so it needs no error result.
func New(store eventstore.Store, cmds *commands.Commands, queries *projections.Queries, sealer *seal.Sealer, opts Config) *Dispatcher {
	opts.setDefaults()
	client := opts.Client
	if client == nil {
		client = NewClient(opts.AllowPrivate, opts.RootCAs, opts.Timeout)
	}
	return &Dispatcher{cmds: cmds, store: store, queries: queries, sealer: sealer, client: client, opts: opts,
		log:   opts.Logger.WithFields(logrus.Fields{"component": "webhooks", "worker": opts.Worker}),
		slots: make(chan struct{}, opts.Concurrency), ready: make(chan struct{}),
		inflight: map[string]bool{}, timers: map[string]*time.Timer{}}
}

// Ready is closed once Run follows the log: an execution that ends after it is delivered by
// the live path, without waiting for a sweep.
func (d *Dispatcher) Ready() <-chan struct{} { return d.ready }

// NewClient is the delivery HTTP client: every connection goes through the SSRF guard (unless
// allowPrivate), roots adds trusted CAs, redirects are not followed (a 3xx is a failed
// attempt: following it would send the signed body somewhere the caller did not name).
func NewClient(allowPrivate bool, roots *x509.CertPool, timeout time.Duration) *http.Client {
	tr := netguard.NewTransport(allowPrivate)
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tr.ResponseHeaderTimeout = timeout
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Run delivers until ctx ends, then waits for the requests in flight (each bounded by Timeout).
func (d *Dispatcher) Run(ctx context.Context) error {
	terminals, err := feed.Open(ctx, d.store, eventstore.Filter{Types: []string{
		execution.Completed{}.EventType(), execution.Failed{}.EventType(), execution.WebhookReplayRequested{}.EventType()}}, d.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped during start-up: a clean stop
		}
		return fmt.Errorf("webhooks: %w", err)
	}
	runs, err := feed.Open(ctx, d.store, runFilter(), d.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("webhooks: %w", err)
	}
	close(d.ready)
	sweep := time.NewTicker(d.opts.SweepInterval)
	defer sweep.Stop()
	d.sweep(ctx)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case ev, ok := <-terminals:
			if ok && d.mayBeDue(ev) {
				d.dispatch(ctx, strings.TrimPrefix(ev.Stream, execution.Category+"-"))
			}
		case ev, ok := <-runs:
			if ok {
				d.runEvent(ctx, ev)
			}
		case <-sweep.C:
			d.sweep(ctx)
		}
	}
	d.mu.Lock()
	d.stopped = true
	for id, t := range d.timers {
		t.Stop()
		delete(d.timers, id)
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

// mayBeDue is false when ev says the execution has no callback, or this process knows the
// execution as of ev or later and it owes no delivery: most executions, which then cost no read
// (an execution another instance ran is not in this one's cache).
func (d *Dispatcher) mayBeDue(ev eventstore.RecordedEvent) bool {
	if noCallback(ev) {
		return false
	}
	st, ok := d.cmds.Webhooks.CachedExecution(strings.TrimPrefix(ev.Stream, execution.Category+"-"), ev.Revision)
	return !ok || st.Delivery.Pending
}

// noCallback reports a terminal event that says its execution owes no webhook.
// The event is the process's decoded one (internal/decoded): the projectors and the executor's
// feeds decode the same terminal events, and a decode here of its own was the dispatcher's
// largest cost on a busy log.
func noCallback(ev eventstore.RecordedEvent) bool {
	switch ev.Type {
	case execution.Completed{}.EventType(), execution.Failed{}.EventType():
	default:
		return false
	}
	e, err := decoded.Event(ev)
	if err != nil {
		return false
	}
	switch t := e.(type) {
	case execution.Completed:
		return t.NoCallback
	case execution.Failed:
		return t.NoCallback
	}
	return false
}

func (d *Dispatcher) sweep(ctx context.Context) {
	ids, err := d.queries.DueWebhooks(ctx, d.opts.Now(), d.opts.SweepGrace, 4*d.opts.Concurrency)
	if err != nil {
		if ctx.Err() == nil {
			d.log.WithError(err).Warn("sweep for due webhooks failed")
		}
		return
	}
	for _, id := range ids {
		d.dispatch(ctx, id)
	}
	d.sweepRuns(ctx)
}

// dispatch delivers id's due attempt in a slot unless this process works on it already. It
// blocks while every slot is busy: back-pressure on the feed.
func (d *Dispatcher) dispatch(ctx context.Context, id string) {
	d.mu.Lock()
	if d.inflight[id] || d.stopped {
		d.mu.Unlock()
		return
	}
	d.inflight[id] = true
	d.wg.Add(1)
	d.mu.Unlock()
	release := func() {
		d.mu.Lock()
		delete(d.inflight, id)
		d.mu.Unlock()
		d.wg.Done()
	}
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		release()
		return
	}
	go func() {
		defer release()
		defer func() { <-d.slots }()
		if run, ok := strings.CutPrefix(id, runKey); ok {
			d.processRun(ctx, run)
			return
		}
		d.process(ctx, id)
	}()
}

// schedule dispatches id again at the time its next attempt is due.
func (d *Dispatcher) schedule(ctx context.Context, id string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	if t := d.timers[id]; t != nil {
		t.Stop()
	}
	d.timers[id] = time.AfterFunc(max(at.Sub(d.opts.Now()), 0), func() {
		d.mu.Lock()
		delete(d.timers, id)
		d.mu.Unlock()
		d.dispatch(ctx, id)
	})
}

// process claims id's due attempt, sends it and records the outcome.
func (d *Dispatcher) process(ctx context.Context, id string) {
	log := d.log.WithField("executionId", id)
	st, err := d.cmds.Webhooks.Execution(ctx, id)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, domain.ErrNotFound) {
			log.WithError(err).Warn("cannot load execution for delivery; a sweep will retry")
		}
		return
	}
	if !st.WebhookDue(d.opts.Now()) {
		if at := st.WebhookRetryAt(); !at.IsZero() {
			d.schedule(ctx, id, at)
		}
		return
	}
	st, err = d.cmds.Webhooks.StartWebhookAttempt(ctx, id, d.opts.Worker, d.opts.Timeout+d.opts.LeaseMargin)
	if errors.Is(err, execution.ErrNoDeliveryDue) {
		return // another instance claimed it
	}
	if err != nil {
		if ctx.Err() == nil {
			log.WithError(err).Warn("cannot claim webhook attempt; a sweep will retry")
		}
		return
	}
	attempt := st.Delivery.AttemptCount
	// The request and its record outlive shutdown: a send cut short would only be repeated.
	work := context.WithoutCancel(ctx)
	outcome := d.send(work, st, attempt)
	after, err := d.cmds.Webhooks.RecordWebhookOutcome(work, id, d.opts.Worker, attempt, outcome)
	switch {
	case errors.Is(err, execution.ErrDeliveryLost):
		log.WithField("attempt", attempt).Info("webhook attempt taken over before its outcome was recorded")
		return
	case err != nil:
		log.WithError(err).WithField("attempt", attempt).Error("cannot record webhook outcome; the attempt will be repeated after its lease")
		return
	}
	if after.Delivery.Pending {
		d.schedule(ctx, id, after.WebhookRetryAt())
	}
}

// send makes attempt's request and classifies the answer.
func (d *Dispatcher) send(ctx context.Context, st execution.State, attempt int) execution.WebhookOutcome {
	body, err := json.Marshal(st.Record())
	if err != nil {
		return execution.WebhookOutcome{Error: errorJSON(0, "", "encode the record: "+err.Error()), Stop: true}
	}
	t := target{URL: st.Callback.URL, SealedSecret: st.Callback.SealedSecret, SealedHeaders: st.Callback.SealedHeaders,
		Event: EventTerminal, DeliveryID: st.ID + ":" + strconv.Itoa(attempt), Field: "callback"}
	log := d.log.WithField("executionId", st.ID).WithField("attempt", attempt)
	return d.deliver(ctx, t, body, max(attempt-st.Delivery.RoundStart, 1), log)
}

// target is where one attempt goes and what names it: the URL, the sealed secret and headers
// (opened with Field+"Secret" and Field+"Headers" as associated data), the x-event and the
// x-delivery-id.
type target struct {
	URL, SealedSecret, SealedHeaders string
	Event, DeliveryID, Field         string
}

// deliver posts body to t and classifies the answer; k is the attempt's place in its round.
func (d *Dispatcher) deliver(ctx context.Context, t target, body []byte, k int, log logrus.FieldLogger) execution.WebhookOutcome {
	req, err := d.request(ctx, t, body)
	if err != nil {
		return execution.WebhookOutcome{Error: errorJSON(0, "", err.Error()), Stop: true}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// The full error, with addresses, for operators only.
		log.WithError(err).Debug("webhook request failed")
		return execution.WebhookOutcome{Error: networkError(err, d.opts.Timeout), RetryIn: d.backoff(k, 0)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseDrain))
	resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return execution.WebhookOutcome{Delivered: true, StatusCode: code}
	}
	o := execution.WebhookOutcome{StatusCode: code, Error: errorJSON(code, "",
		fmt.Sprintf("the receiver answered %d %s", code, http.StatusText(code)))}
	if code == http.StatusGone {
		o.Stop = true
		return o
	}
	var retryAfter time.Duration
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), d.opts.Now())
	}
	o.RetryIn = d.backoff(k, retryAfter)
	return o
}

// request builds the POST of body to t: the SPEC.md 6.1 headers, the caller's headers and the
// signature. Opened secrets live only in this request.
func (d *Dispatcher) request(ctx context.Context, t target, body []byte) (*http.Request, error) {
	u, err := url.Parse(t.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("the %sUrl is not an absolute https URL", t.Field)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build the request: %w", err)
	}
	if t.SealedHeaders != "" {
		plain, err := d.sealer.Open(t.SealedHeaders, []byte(t.Field+"Headers"))
		if err != nil {
			return nil, fmt.Errorf("the %sHeaders could not be opened (was the secret key rotated away?)", t.Field)
		}
		var custom map[string]string
		if err := json.Unmarshal(plain, &custom); err != nil {
			return nil, fmt.Errorf("the %sHeaders could not be decoded", t.Field)
		}
		for name, value := range custom {
			req.Header.Set(name, value)
		}
	}
	// The SPEC.md 6.1 headers go last so that nothing custom can replace them.
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderDeliveryID, t.DeliveryID)
	req.Header.Set(HeaderEvent, t.Event)
	if t.SealedSecret != "" {
		secret, err := d.sealer.Open(t.SealedSecret, []byte(t.Field+"Secret"))
		if err != nil {
			return nil, fmt.Errorf("the %sSecret could not be opened (was the secret key rotated away?)", t.Field)
		}
		ts := d.opts.Now().UTC().Format(TimestampFormat)
		req.Header.Set(HeaderSignatureVersion, SignatureVersion)
		req.Header.Set(HeaderSignatureTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(secret, ts, body))
	}
	return req, nil
}

// Sign is the x-signature value: "sha256=" and the lowercase hex HMAC-SHA256, keyed by the
// secret, of timestamp + "." + body.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// backoff is the wait after a failed attempt: RetryBase·RetryFactor^(k-1) for the round's k-th
// attempt, ±20% jitter so that a receiver's recovery is not met by every sender at once; a
// Retry-After may lengthen it up to MaxRetryDelay, never shorten it.
func (d *Dispatcher) backoff(k int, retryAfter time.Duration) time.Duration {
	delay := d.opts.RetryBase
	for i := 1; i < k && delay < d.opts.MaxRetryDelay; i++ {
		delay *= time.Duration(d.opts.RetryFactor)
	}
	delay = time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
	if retryAfter > delay {
		delay = min(retryAfter, max(d.opts.MaxRetryDelay, delay))
	}
	return delay
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// errorJSON is a lastError (SPEC.md 2.2): the status code of an answer, or the kind of network
// error, and a message.
func errorJSON(statusCode int, networkErr, message string) json.RawMessage {
	// Fields in jsonb's key order (shorter keys first), so the error reads the same freshly
	// decided and folded back from the store.
	v := struct {
		Message      string `json:"message"`
		StatusCode   int    `json:"statusCode,omitempty"`
		NetworkError string `json:"networkError,omitempty"`
	}{message, statusCode, networkErr}
	b, _ := json.Marshal(v)
	return b
}

// networkError describes a failed request in words (netguard.Describe): the error's own text
// names the address the callback's host resolved to and the DNS resolver's, which lastError,
// shown to the caller, must not.
func networkError(err error, timeout time.Duration) json.RawMessage {
	var ce *tls.CertificateVerificationError
	switch {
	case errors.Is(err, netguard.ErrBlockedAddress):
		return errorJSON(0, "blocked_address", "destination refused: "+netguard.Describe(err))
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return errorJSON(0, "timeout", fmt.Sprintf("no answer within %s", timeout))
	case errors.As(err, &ce):
		return errorJSON(0, "tls", netguard.Describe(err))
	}
	return errorJSON(0, "connection", netguard.Describe(err))
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
