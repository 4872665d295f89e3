package modules

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/modules/netguard"
)

// Limits of http.request.
const (
	DefaultMaxHTTPResponseBytes = 1 << 20 // 1 MiB
	DefaultHTTPTimeoutMs        = 10000
	MaxHTTPTimeoutMs            = 30000
	MaxHTTPRedirects            = 5
)

var errTooManyRedirects = errors.New("too many redirects")

type httpRequestModule struct {
	allowPrivate bool
	maxBytes     int64
	userAgent    string
	client       *http.Client
}

func httpModule(opts BuiltinsConfig) Module {
	h := &httpRequestModule{
		allowPrivate: opts.AllowPrivateNetworks,
		maxBytes:     opts.MaxHTTPResponseBytes,
		userAgent:    opts.HTTPUserAgent,
	}
	h.client = &http.Client{
		Transport: netguard.NewTransport(opts.AllowPrivateNetworks),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if noFollow, _ := req.Context().Value(noFollowKey{}).(bool); noFollow {
				return http.ErrUseLastResponse
			}
			if len(via) > MaxHTTPRedirects {
				return errTooManyRedirects
			}
			return nil
		},
	}
	stringMap := `{"type": "object", "additionalProperties": {"type": "string", "maxLength": 8192}, "maxProperties": 100}`
	return mustModule(Definition{
		Name: "http.request",
		Description: "Makes an HTTP(S) request and returns {status, headers, body}; " +
			"private, loopback and link-local destinations are refused.",
		CostMilli: 5000,
		ConfigSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET"},
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "http or https URL; input.url is used when absent."},
    "headers": %[1]s,
    "query": %[1]s,
    "body": {"description": "Request body: a string is sent as is (text/plain unless Content-Type is set), any other JSON value as JSON."},
    "timeoutMs": {"type": "integer", "minimum": 1, "maximum": %[2]d, "default": %[3]d},
    "maxResponseBytes": {"type": "integer", "minimum": 1, "maximum": %[4]d, "default": %[4]d},
    "followRedirects": {"type": "boolean", "default": true, "description": "Follow up to 5 redirects."},
    "failOnHttpError": {"type": "boolean", "default": false, "description": "Fail (code http_status) when the final status is 400 or above."}
  }
}`, stringMap, MaxHTTPTimeoutMs, DefaultHTTPTimeoutMs, h.maxBytes)),
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "Used when config.url is absent."},
    "headers": %[1]s,
    "query": %[1]s,
    "body": {"description": "Overrides config.body."}
  }
}`, stringMap)),
		Timeout: (MaxHTTPTimeoutMs + 5000) * time.Millisecond,
		Check: func(config, input json.RawMessage) error {
			_, err := h.prepare(config, input)
			return err
		},
		Run: h.run,
	})
}

type noFollowKey struct{}

type httpConfig struct {
	Method           string            `json:"method"`
	URL              string            `json:"url"`
	Headers          map[string]string `json:"headers"`
	Query            map[string]string `json:"query"`
	Body             json.RawMessage   `json:"body"`
	TimeoutMs        int64             `json:"timeoutMs"`
	MaxResponseBytes int64             `json:"maxResponseBytes"`
	FollowRedirects  *bool             `json:"followRedirects"`
	FailOnHTTPError  bool              `json:"failOnHttpError"`
}

type httpInput struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Query   map[string]string `json:"query"`
	Body    json.RawMessage   `json:"body"`
}

// httpPlan is a validated request.
type httpPlan struct {
	method          string
	url             *url.URL
	header          http.Header
	body            []byte
	timeout         time.Duration
	maxBytes        int64
	followRedirects bool
	failOnHTTPError bool
}

var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Proxy-Authorization": true,
}

func (h *httpRequestModule) prepare(config, input json.RawMessage) (*httpPlan, error) {
	var cfg httpConfig
	if err := decode(config, &cfg); err != nil {
		return nil, invalid("config", "%v", err)
	}
	var in httpInput
	if err := decode(input, &in); err != nil {
		return nil, invalid("input", "%v", err)
	}
	p := &httpPlan{
		method:          cfg.Method,
		header:          http.Header{},
		timeout:         DefaultHTTPTimeoutMs * time.Millisecond,
		maxBytes:        h.maxBytes,
		followRedirects: cfg.FollowRedirects == nil || *cfg.FollowRedirects,
		failOnHTTPError: cfg.FailOnHTTPError,
	}
	if p.method == "" {
		p.method = http.MethodGet
	}
	if cfg.TimeoutMs > 0 {
		p.timeout = time.Duration(cfg.TimeoutMs) * time.Millisecond
	}
	if cfg.MaxResponseBytes > 0 {
		p.maxBytes = cfg.MaxResponseBytes
	}

	rawURL, urlField := cfg.URL, "config.url"
	if rawURL == "" {
		rawURL, urlField = in.URL, "input.url"
	}
	if rawURL == "" {
		return nil, invalid("config.url", "is required (set config.url or input.url)")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalid(urlField, "is not a valid URL: %v", errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalid(urlField, "must be an http or https URL")
	}
	if u.Hostname() == "" {
		return nil, invalid(urlField, "must include a host")
	}
	if !h.allowPrivate {
		if err := netguard.CheckHost(u.Hostname()); err != nil {
			return nil, invalid(urlField, "destination %s is not allowed (loopback, private, link-local and other special-purpose addresses are refused)", u.Hostname())
		}
	}
	if len(cfg.Query) > 0 || len(in.Query) > 0 {
		q := u.Query()
		for _, src := range []map[string]string{cfg.Query, in.Query} {
			for k, v := range src {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
	}
	p.url = u

	for _, src := range []struct {
		field   string
		headers map[string]string
	}{{"config.headers", cfg.Headers}, {"input.headers", in.Headers}} {
		for _, k := range sortedKeys(src.headers) {
			v := src.headers[k]
			field := src.field + "." + k
			if !validHeaderName(k) {
				return nil, invalid(field, "is not a valid header name")
			}
			if forbiddenHeaders[http.CanonicalHeaderKey(k)] {
				return nil, invalid(field, "cannot be set")
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, invalid(field, "must not contain CR, LF or NUL")
			}
			p.header.Set(k, v)
		}
	}

	body := cfg.Body
	if len(in.Body) > 0 && string(in.Body) != "null" {
		body = in.Body
	}
	if len(body) > 0 && string(body) != "null" {
		var s string
		if json.Unmarshal(body, &s) == nil {
			p.body = []byte(s)
			if p.header.Get("Content-Type") == "" {
				p.header.Set("Content-Type", "text/plain; charset=utf-8")
			}
		} else {
			p.body = body
			if p.header.Get("Content-Type") == "" {
				p.header.Set("Content-Type", "application/json")
			}
		}
	}
	if p.header.Get("User-Agent") == "" {
		p.header.Set("User-Agent", h.userAgent)
	}
	return p, nil
}

func (h *httpRequestModule) run(ctx context.Context, call Call) (json.RawMessage, error) {
	p, err := h.prepare(call.Config, call.Input)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "%v", err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if !p.followRedirects {
		reqCtx = context.WithValue(reqCtx, noFollowKey{}, true)
	}
	var body io.Reader
	if p.body != nil {
		body = strings.NewReader(string(p.body))
	}
	req, err := http.NewRequestWithContext(reqCtx, p.method, p.url.String(), body)
	if err != nil {
		return nil, Fail(CodeInvalidRequest, "http.request: %v", err)
	}
	req.Header = p.header

	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.requestError(ctx, reqCtx, p, err)
	}
	defer resp.Body.Close()

	if resp.ContentLength > p.maxBytes {
		return nil, tooLarge(p.maxBytes, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, p.maxBytes+1))
	if err != nil {
		return nil, h.requestError(ctx, reqCtx, p, err)
	}
	if int64(len(data)) > p.maxBytes {
		return nil, tooLarge(p.maxBytes, resp.StatusCode)
	}

	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": flattenHeader(resp.Header),
		"url":     resp.Request.URL.String(),
	}
	switch {
	case isJSONContent(resp.Header.Get("Content-Type")) && json.Valid(data):
		out["body"] = json.RawMessage(data)
	case utf8.Valid(data):
		out["body"] = string(data)
	default:
		out["body"] = base64.StdEncoding.EncodeToString(data)
		out["bodyEncoding"] = "base64"
	}
	if p.failOnHTTPError && resp.StatusCode >= 400 {
		return nil, &Failure{
			Code:    CodeHTTPStatus,
			Message: fmt.Sprintf("http.request: %s %s responded %s", p.method, redact(resp.Request.URL), resp.Status),
			Details: out,
		}
	}
	return json.Marshal(out)
}

func (h *httpRequestModule) requestError(runCtx, reqCtx context.Context, p *httpPlan, err error) error {
	if runCtx.Err() != nil {
		return runCtx.Err() // the run's own deadline or cancellation: Registry.Run decides
	}
	target := p.method + " " + redact(p.url)
	switch {
	case reqCtx.Err() != nil:
		return &Failure{
			Code:    CodeTimeout,
			Message: fmt.Sprintf("http.request: %s: no complete response within %d ms", target, p.timeout.Milliseconds()),
		}
	case errors.Is(err, netguard.ErrBlockedAddress):
		return &Failure{
			Code:    CodeBlockedAddress,
			Message: fmt.Sprintf("http.request: %s: destination refused: it resolves to a loopback, private, link-local or other special-purpose address", target),
		}
	case errors.Is(err, errTooManyRedirects):
		return &Failure{
			Code:    CodeTooManyRedirects,
			Message: fmt.Sprintf("http.request: %s: stopped after %d redirects", target, MaxHTTPRedirects),
		}
	}
	// In words: the error's own text names the resolved address and the DNS resolver's.
	return &Failure{Code: CodeNetwork, Message: fmt.Sprintf("http.request: %s: %s", target, netguard.Describe(err))}
}

func tooLarge(limit int64, status int) *Failure {
	return &Failure{
		Code:    CodeResponseTooLarge,
		Message: fmt.Sprintf("http.request: response body is larger than %d bytes", limit),
		Details: map[string]int64{"limitBytes": limit, "status": int64(status)},
	}
}

// redact drops userinfo from a URL for messages.
func redact(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	c := *u
	c.User = nil
	return c.String()
}

func flattenHeader(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = strings.Join(v, ", ")
	}
	return out
}

func isJSONContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
