// Package client is the Go client of Switchyard's SDK API (SPEC.md 4.1 to 4.8). It signs every
// request with the API key's Ed25519 secret (SPEC.md 5 rule 1), retries 429, 502 and 503
// (honouring Retry-After, else with backoff), and returns typed errors. It uses only the standard library.
package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client calls one Switchyard service with one API key. It is safe for concurrent use.
type Client struct {
	baseURL    string
	apiKey     string
	key        ed25519.PrivateKey
	httpClient *http.Client
	now        func() time.Time
	maxRetries int
	backoff    time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (default: 30 s timeout).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.httpClient = h } }

// WithRetries sets how often a 429, 502 or 503 answer is retried (default 3; 0 disables).
func WithRetries(n int) Option { return func(c *Client) { c.maxRetries = n } }

// WithBackoff sets the first wait before retrying an answer without Retry-After (default
// 250 ms); each further retry doubles it, with jitter.
func WithBackoff(d time.Duration) Option { return func(c *Client) { c.backoff = d } }

// WithClock replaces the clock used for request timestamps, for tests.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns a client for the service at baseURL (for example http://localhost:8080) using
// apiKey (ws_...) and apiSecret (base64 PKCS#8 DER Ed25519 private key, as minted).
func New(baseURL, apiKey, apiSecret string, opts ...Option) (*Client, error) {
	key, err := ParseSecret(apiSecret)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(apiKey, "ws_") {
		return nil, errors.New("client: the API key must begin with ws_")
	}
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, key: key,
		httpClient: &http.Client{Timeout: 30 * time.Second, Transport: sharedTransport}, now: time.Now, maxRetries: 3, backoff: 250 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// sharedTransport is the connection pool of every Client made without WithHTTPClient:
// http.DefaultTransport's configuration with room for a busy caller's idle connections. At
// its default of two per host, a client shared by many goroutines closed, after each answer,
// every connection beyond two and dialled again for the next call.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()

// ParseSecret decodes an apiSecret: base64 of a PKCS#8 DER Ed25519 private key.
func ParseSecret(apiSecret string) (ed25519.PrivateKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(apiSecret))
	if err != nil {
		return nil, fmt.Errorf("client: apiSecret is not base64: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("client: apiSecret is not a PKCS#8 key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("client: apiSecret is not an Ed25519 key")
	}
	return ek, nil
}

// Sign returns the X-Sdk-Signature of a request: base64 Ed25519 over METHOD|PATH|TIMESTAMP|BODY,
// where PATH is the request target (path and query) and an empty body signs as "".
func Sign(key ed25519.PrivateKey, method, path, timestamp string, body []byte) string {
	msg := make([]byte, 0, len(method)+len(path)+len(timestamp)+len(body)+3)
	msg = append(msg, method...)
	msg = append(msg, '|')
	msg = append(msg, path...)
	msg = append(msg, '|')
	msg = append(msg, timestamp...)
	msg = append(msg, '|')
	msg = append(msg, body...)
	return base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
}

// Error is a non-2xx answer, with the SPEC.md 7 body.
type Error struct {
	StatusCode int    `json:"statusCode"`
	Name       string `json:"error"`
	Message    string `json:"message"`
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration `json:"-"`
	// retryAfterSet tells a Retry-After of 0 (retry at once) from none.
	retryAfterSet bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("switchyard: %d %s: %s", e.StatusCode, e.Name, e.Message)
}

// IsStatus reports whether err is an *Error with the status code.
func IsStatus(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == code
}

// retryable are the statuses worth sending the same request again for: the rate limit, and a
// service or its database that is briefly unavailable (docs/operations.md).
var retryable = map[int]bool{http.StatusTooManyRequests: true, http.StatusBadGateway: true, http.StatusServiceUnavailable: true}

// do sends a signed request and decodes a 2xx JSON answer into out (unless nil).
func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	return c.doWith(ctx, method, path, nil, body, out)
}

// doWith is do with extra headers, sent unchanged on every attempt. A retryable answer is
// sent again after the server's Retry-After, or else an exponential backoff with jitter, at
// most maxRetries times. A wait that would outlast ctx's deadline is not started: the last
// answer is returned at once instead.
func (c *Client) doWith(ctx context.Context, method, path string, header http.Header, body any, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("client: encode request: %w", err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, path, header, payload, out)
		var apiErr *Error
		if !errors.As(err, &apiErr) || attempt >= c.maxRetries || !retryable[apiErr.StatusCode] {
			return err
		}
		wait := apiErr.RetryAfter
		switch {
		case !apiErr.retryAfterSet:
			wait = time.Duration(float64(c.backoff<<attempt) * (0.5 + rand.Float64()))
		case apiErr.StatusCode != http.StatusTooManyRequests:
			// Every client of a service that was down hears the same Retry-After: spread them
			// over half as long again, so they do not all come back in the same instant.
			wait += time.Duration(float64(wait) * 0.5 * rand.Float64())
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, header http.Header, payload []byte, out any) error {
	req, err := c.newRequest(ctx, method, path, payload)
	if err != nil {
		return err
	}
	for name, values := range header {
		req.Header[name] = values
	}
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("client: read %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return errorOf(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: decode %s %s: %w", method, path, err)
	}
	return nil
}

// newRequest builds a signed request; the same bytes are signed and sent.
func (c *Client) newRequest(ctx context.Context, method, path string, payload []byte) (*http.Request, error) {
	if method != http.MethodGet && method != http.MethodHead {
		// Identical requests in one second would have identical signatures, and the server
		// refuses a repeated state-changing signature as a replay (docs/authentication.md).
		path += querySep(path) + "nonce=" + nonce()
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ts := strconv.FormatInt(c.now().Unix(), 10)
	req.Header.Set("X-Api-Key", c.apiKey)
	req.Header.Set("X-Sdk-Timestamp", ts)
	req.Header.Set("X-Sdk-Signature", Sign(c.key, method, req.URL.RequestURI(), ts, payload))
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func errorOf(resp *http.Response, data []byte) error {
	e := &Error{StatusCode: resp.StatusCode, Name: http.StatusText(resp.StatusCode)}
	_ = json.Unmarshal(data, e)
	e.StatusCode = resp.StatusCode
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(data))
	}
	e.RetryAfter, e.retryAfterSet = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// retryAfter reads Retry-After: delay-seconds or an HTTP-date (RFC 9110 10.2.3). ok is false
// when the header is absent or malformed; a date in the past means at once.
func retryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func querySep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// nonce is 12 random bytes, hex.
func nonce() string {
	b := make([]byte, 12)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}
