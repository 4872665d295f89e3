package run

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Idempotency-Key on a trigger (POST /v1/sdk/workflows/:workflowId): the key's stream binds it,
// for IdempotencyWindow, to the workflow, the request body and the runs the first trigger
// started, as submit's idempotency stream binds a key to an execution. It is a stream of its
// own (not submit's): a key used on both endpoints means two unrelated requests.

// TriggerKeyCategory is the stream category of trigger keys: triggerkey-<hash of workspace and key>.
const TriggerKeyCategory = "triggerkey"

// TriggerKeyWindow is how long a trigger's Idempotency-Key keeps answering with its runs.
const TriggerKeyWindow = 24 * time.Hour

// ErrTriggerKeyReused is a live Idempotency-Key sent again with another workflow or body (409).
var ErrTriggerKeyReused = fmt.Errorf("Idempotency-Key was already used with a different workflow or request body: %w", domain.ErrConflict)

// KeyedRun is one run a trigger started: its id, its job id and the ON_API_CALLED component
// it starts from.
type KeyedRun struct {
	RunID     string `json:"runId"`
	JobID     string `json:"jobId"`
	TriggerID string `json:"triggerId"`
}

// TriggerKeyUsed binds an Idempotency-Key to a trigger request and the runs it starts.
type TriggerKeyUsed struct {
	WorkspaceID string     `json:"workspaceId"`
	WorkflowID  string     `json:"workflowId"`
	BodyHash    string     `json:"bodyHash"`
	Runs        []KeyedRun `json:"runs"`
	ExpiresAt   time.Time  `json:"expiresAt"`
	At          time.Time  `json:"at"`
}

// EventType names the event in the log.
func (TriggerKeyUsed) EventType() string { return "TriggerKeyUsed" }

func init() { domain.Events.Register(TriggerKeyUsed{}) }

// TriggerKey is a trigger key's stream folded: its latest use.
type TriggerKey struct {
	WorkflowID string
	BodyHash   string
	Runs       []KeyedRun
	ExpiresAt  time.Time
}

// Evolve applies one event.
func (k TriggerKey) Evolve(e domain.Event) TriggerKey {
	if ev, ok := e.(TriggerKeyUsed); ok {
		return TriggerKey{WorkflowID: ev.WorkflowID, BodyHash: ev.BodyHash, Runs: slices.Clone(ev.Runs), ExpiresAt: ev.ExpiresAt}
	}
	return k
}

// Live reports whether the key still answers at now.
func (k TriggerKey) Live(now time.Time) bool { return len(k.Runs) > 0 && now.Before(k.ExpiresAt) }

// DecideTriggerKey returns the runs a trigger of workflowID with bodyHash maps to: the
// recorded ones when the key is live for the same request (no events), a conflict when it is
// live for another, else a new binding to runs.
func DecideTriggerKey(k TriggerKey, workspaceID, workflowID, bodyHash string, runs []KeyedRun, now time.Time) ([]KeyedRun, []domain.Event, error) {
	if k.Live(now) {
		if k.WorkflowID != workflowID || k.BodyHash != bodyHash {
			return nil, nil, ErrTriggerKeyReused
		}
		return slices.Clone(k.Runs), nil, nil
	}
	runs = slices.Clone(runs)
	return runs, []domain.Event{TriggerKeyUsed{WorkspaceID: workspaceID, WorkflowID: workflowID, BodyHash: bodyHash,
		Runs: runs, ExpiresAt: now.Add(TriggerKeyWindow).UTC(), At: now.UTC()}}, nil
}
