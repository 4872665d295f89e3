package execution

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// WebhookAttempt is one callback delivery attempt as the execution's history records it.
type WebhookAttempt struct {
	Attempt    int
	StartedAt  time.Time
	EndedAt    time.Time
	StatusCode int
	Delivered  bool
	// Error is the failure of an attempt that failed; Final when no retry follows it.
	Error   json.RawMessage
	Final   bool
	RetryAt time.Time
}

// WebhookAttempts lists the delivery attempts of an execution's history, oldest first. The
// state keeps only the latest attempt; the console shows them all.
func WebhookAttempts(history []domain.Event) []WebhookAttempt {
	var out []WebhookAttempt
	at := map[int]int{} // attempt number -> index in out
	get := func(n int) *WebhookAttempt {
		i, ok := at[n]
		if !ok {
			i = len(out)
			at[n] = i
			out = append(out, WebhookAttempt{Attempt: n})
		}
		return &out[i]
	}
	for _, e := range history {
		switch ev := e.(type) {
		case WebhookAttemptStarted:
			get(ev.Attempt).StartedAt = ev.At
		case WebhookDelivered:
			a := get(ev.Attempt)
			a.EndedAt, a.StatusCode, a.Delivered = ev.At, ev.StatusCode, true
		case WebhookAttemptFailed:
			a := get(ev.Attempt)
			a.EndedAt, a.Error, a.Final, a.RetryAt = ev.At, ev.Error, ev.Final, ev.RetryAt
		}
	}
	return out
}
