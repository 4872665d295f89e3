package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Execution statuses (SPEC.md 2.1).
const (
	StatusCreated   = "CREATED"
	StatusRunning   = "RUNNING"
	StatusCompleted = "COMPLETED"
	StatusFailed    = "FAILED"
)

// Execution is a component execution record (SPEC.md 2.1).
type Execution struct {
	ID         string          `json:"id"`
	Module     string          `json:"module"`
	Status     string          `json:"status"`
	Completed  bool            `json:"completed"`
	Output     json.RawMessage `json:"output"`
	Error      json.RawMessage `json:"error"`
	TotalUsage float64         `json:"totalUsage"`
	Callback   Callback        `json:"callback"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// Terminal reports whether the execution has ended.
func (e *Execution) Terminal() bool { return e.Status == StatusCompleted || e.Status == StatusFailed }

// Callback is the callback object of an execution (SPEC.md 2.2).
type Callback struct {
	URL                *string         `json:"url"`
	Signed             bool            `json:"signed"`
	SignatureAlgorithm *string         `json:"signatureAlgorithm"`
	HeaderNames        []string        `json:"headerNames"`
	LastAttemptAt      *time.Time      `json:"lastAttemptAt"`
	DeliveredAt        *time.Time      `json:"deliveredAt"`
	AttemptCount       int             `json:"attemptCount"`
	LastError          json.RawMessage `json:"lastError"`
}

// SubmitRequest is the body of POST /v1/sdk/components (SPEC.md 4.1). Input and Config are
// sent as {} when nil.
type SubmitRequest struct {
	Module          string            `json:"module"`
	Input           any               `json:"input"`
	Config          any               `json:"config"`
	Attempts        int               `json:"attempts,omitempty"`
	WaitForMs       int               `json:"waitForMs,omitempty"`
	CallbackURL     string            `json:"callbackUrl,omitempty"`
	CallbackSecret  string            `json:"callbackSecret,omitempty"`
	CallbackHeaders map[string]string `json:"callbackHeaders,omitempty"`
	// IdempotencyKey, when set, is sent as the Idempotency-Key header on every attempt
	// (docs/executions.md), so that a submit the client retries after a 502 or 503 whose first
	// attempt did reach the database runs once. It costs the service one more write per submit.
	IdempotencyKey string `json:"-"`
}

// Submit executes a component. With WaitForMs the answer may already be COMPLETED.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*Execution, error) {
	if req.Input == nil {
		req.Input = struct{}{}
	}
	if req.Config == nil {
		req.Config = struct{}{}
	}
	var header http.Header
	if req.IdempotencyKey != "" {
		header = http.Header{"Idempotency-Key": {req.IdempotencyKey}}
	}
	var out Execution
	if err := c.doWith(ctx, http.MethodPost, "/v1/sdk/components", header, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetExecution reads an execution record.
func (c *Client) GetExecution(ctx context.Context, id string) (*Execution, error) {
	var out Execution
	if err := c.do(ctx, http.MethodGet, "/v1/sdk/components/executions/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Module describes a component module as GET /v1/sdk/modules lists it.
type Module struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Cost         float64         `json:"cost"`
	ConfigSchema json.RawMessage `json:"configSchema"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	TimeoutMs    int64           `json:"timeoutMs"`
}

// Page is one page of a list.
type Page[T any] struct {
	Data       []T `json:"data"`
	Total      int `json:"total"`
	Page       int `json:"page"`
	TotalPages int `json:"totalPages"`
}

// ListModules lists the modules the service runs (page from 1, limit up to 100).
func (c *Client) ListModules(ctx context.Context, page, limit int) (*Page[Module], error) {
	var out Page[Module]
	if err := c.do(ctx, http.MethodGet, "/v1/sdk/modules"+pageQuery(page, limit), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// pageQuery is the query string of a list request; zero values are left to the server.
func pageQuery(page, limit int) string {
	q := url.Values{}
	if page > 0 {
		q.Set("page", itoa(page))
	}
	if limit > 0 {
		q.Set("limit", itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func itoa(n int) string { return strconv.Itoa(n) }
