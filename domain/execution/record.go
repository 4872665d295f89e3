package execution

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain/billing"
)

// SignatureAlgorithm is the webhook signature scheme of SPEC.md 2.2 and 6.1.
const SignatureAlgorithm = "hmac-sha256-v1"

// Record is the execution record of SPEC.md 2.1: the body of submit, get, replay-callback and
// the webhook.
type Record struct {
	ID         string          `json:"id"`
	Module     string          `json:"module"`
	Status     Status          `json:"status"`
	Completed  bool            `json:"completed"`
	Output     json.RawMessage `json:"output"`
	Error      json.RawMessage `json:"error"`
	TotalUsage billing.Credits `json:"totalUsage"`
	Callback   CallbackRecord  `json:"callback"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// CallbackRecord is the callback object of SPEC.md 2.2.
type CallbackRecord struct {
	URL                *string         `json:"url"`
	Signed             bool            `json:"signed"`
	SignatureAlgorithm *string         `json:"signatureAlgorithm"`
	HeaderNames        []string        `json:"headerNames"`
	LastAttemptAt      *time.Time      `json:"lastAttemptAt"`
	DeliveredAt        *time.Time      `json:"deliveredAt"`
	AttemptCount       int             `json:"attemptCount"`
	LastError          json.RawMessage `json:"lastError"`
}

var null = json.RawMessage("null")

// Record renders the state as SPEC.md 2.1 shows it: output only once COMPLETED, error only
// once FAILED (a failed attempt that will be retried is still RUNNING with no error).
func (s State) Record() Record {
	r := Record{ID: s.ID, Module: s.Module, Status: s.Status, Completed: s.Status == StatusCompleted,
		Output: null, Error: null, TotalUsage: s.TotalUsage, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Callback: CallbackRecord{HeaderNames: []string{}, LastError: null}}
	if s.Status == StatusCompleted && len(s.Output) > 0 {
		r.Output = s.Output
	}
	if s.Status == StatusFailed && len(s.Error) > 0 {
		r.Error = s.Error
	}
	if s.Callback.URL != "" {
		u := s.Callback.URL
		r.Callback.URL = &u
	}
	if s.Callback.Signed() {
		alg := SignatureAlgorithm
		r.Callback.Signed, r.Callback.SignatureAlgorithm = true, &alg
	}
	if len(s.Callback.HeaderNames) > 0 {
		r.Callback.HeaderNames = append([]string(nil), s.Callback.HeaderNames...)
	}
	d := s.Delivery
	r.Callback.AttemptCount = d.AttemptCount
	if !d.LastAttemptAt.IsZero() {
		t := d.LastAttemptAt
		r.Callback.LastAttemptAt = &t
	}
	if !d.DeliveredAt.IsZero() {
		t := d.DeliveredAt
		r.Callback.DeliveredAt = &t
	}
	if len(d.LastError) > 0 {
		r.Callback.LastError = d.LastError
	}
	return r
}
