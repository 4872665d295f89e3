package execution

import (
	"fmt"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// CacheCategory is the stream category of cache windows: cachewindow-<key>, one stream per
// workspace and identical (module, input, config). Keeping the window in a stream makes "the
// first call in the window" a decision taken by expected revision, so two instances receiving
// the same call at once never both bill it.
const CacheCategory = "cachewindow"

// CacheWindowOpened records the execution that bills normally for a key until ExpiresAt; later
// identical calls until then reuse its output for free.
type CacheWindowOpened struct {
	Key         string    `json:"key"`
	ExecutionID string    `json:"executionId"`
	ExpiresAt   time.Time `json:"expiresAt"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (CacheWindowOpened) EventType() string { return "CacheWindowOpened" }

// CacheWindow is a cache key's stream folded: the window open last.
type CacheWindow struct {
	ExecutionID string
	ExpiresAt   time.Time
}

// Evolve applies one event.
func (w CacheWindow) Evolve(e domain.Event) CacheWindow {
	if ev, ok := e.(CacheWindowOpened); ok {
		return CacheWindow{ExecutionID: ev.ExecutionID, ExpiresAt: ev.ExpiresAt}
	}
	return w
}

// Leader returns the execution whose output a call at now may reuse, if the window is open.
func (w CacheWindow) Leader(now time.Time) (string, bool) {
	if w.ExecutionID == "" || !now.Before(w.ExpiresAt) {
		return "", false
	}
	return w.ExecutionID, true
}

// DecideOpenWindow opens a window led by executionID unless one is open already.
func DecideOpenWindow(w CacheWindow, key, executionID string, window time.Duration, now time.Time) []domain.Event {
	if _, open := w.Leader(now); open {
		return nil
	}
	return []domain.Event{CacheWindowOpened{Key: key, ExecutionID: executionID, ExpiresAt: now.Add(window).UTC(), At: now.UTC()}}
}

// IdempotencyCategory is the stream category of Idempotency-Key records:
// idempotency-<hash of workspace and key>.
const IdempotencyCategory = "idempotency"

// IdempotencyWindow is how long an Idempotency-Key keeps answering with its execution.
const IdempotencyWindow = 24 * time.Hour

// ErrIdempotencyKeyReused is a live Idempotency-Key sent again with another body (409).
var ErrIdempotencyKeyReused = fmt.Errorf("Idempotency-Key was already used with a different request body: %w", domain.ErrConflict)

// IdempotencyKeyUsed binds an Idempotency-Key to a request body and the execution it created.
type IdempotencyKeyUsed struct {
	WorkspaceID string    `json:"workspaceId"`
	BodyHash    string    `json:"bodyHash"`
	ExecutionID string    `json:"executionId"`
	ExpiresAt   time.Time `json:"expiresAt"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (IdempotencyKeyUsed) EventType() string { return "IdempotencyKeyUsed" }

// IdempotencyRecord is an idempotency key's stream folded: its latest use.
type IdempotencyRecord struct {
	BodyHash    string
	ExecutionID string
	ExpiresAt   time.Time
}

// Evolve applies one event.
func (r IdempotencyRecord) Evolve(e domain.Event) IdempotencyRecord {
	if ev, ok := e.(IdempotencyKeyUsed); ok {
		return IdempotencyRecord{BodyHash: ev.BodyHash, ExecutionID: ev.ExecutionID, ExpiresAt: ev.ExpiresAt}
	}
	return r
}

// DecideIdempotencyKey returns the execution a request with bodyHash maps to: the recorded
// one when the key is live with the same body (no events), a conflict when it is live with
// another body, else a new record for executionID.
func DecideIdempotencyKey(r IdempotencyRecord, workspaceID, bodyHash, executionID string, now time.Time) (string, []domain.Event, error) {
	if r.ExecutionID != "" && now.Before(r.ExpiresAt) {
		if r.BodyHash != bodyHash {
			return "", nil, ErrIdempotencyKeyReused
		}
		return r.ExecutionID, nil, nil
	}
	return executionID, []domain.Event{IdempotencyKeyUsed{WorkspaceID: workspaceID, BodyHash: bodyHash, ExecutionID: executionID,
		ExpiresAt: now.Add(IdempotencyWindow).UTC(), At: now.UTC()}}, nil
}

func init() { domain.Events.Register(CacheWindowOpened{}, IdempotencyKeyUsed{}) }
