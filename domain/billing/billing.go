// Package billing is a workspace's credit account: paid credit bought by top-up (never expires),
// plan-included usage reset at each renewal, and charges for executions (SPEC.md 2.8).
package billing

import (
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of billing accounts: billing-<workspaceId>.
const Category = "billing"

// CreditsPurchased adds paid credit.
type CreditsPurchased struct {
	WorkspaceID string    `json:"workspaceId"`
	Amount      Credits   `json:"amount"`
	Reference   string    `json:"reference,omitempty"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (CreditsPurchased) EventType() string { return "CreditsPurchased" }

// IdempotencyKey makes a top-up with a reference happen once however often it is retried.
func (e CreditsPurchased) IdempotencyKey() string {
	if e.Reference == "" {
		return ""
	}
	return "topup:" + e.WorkspaceID + ":" + e.Reference
}

// PlanRenewed resets the plan-included balance to Included; unused included credits lapse.
type PlanRenewed struct {
	WorkspaceID string    `json:"workspaceId"`
	Included    Credits   `json:"included"`
	Lapsed      Credits   `json:"lapsed"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (PlanRenewed) EventType() string { return "PlanRenewed" }

// CreditsCharged bills one execution once: FromUsage is taken from the plan-included balance
// first, FromCredit from paid credit for the rest.
type CreditsCharged struct {
	WorkspaceID string    `json:"workspaceId"`
	Cause       string    `json:"cause"` // e.g. execution-<id>; one charge per cause
	Amount      Credits   `json:"amount"`
	FromUsage   Credits   `json:"fromUsage"`
	FromCredit  Credits   `json:"fromCredit"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (CreditsCharged) EventType() string { return "CreditsCharged" }

// IdempotencyKey makes a charge for one cause append the same event id on every retry.
func (e CreditsCharged) IdempotencyKey() string { return "charge:" + e.WorkspaceID + ":" + e.Cause }

func init() { domain.Events.Register(CreditsPurchased{}, PlanRenewed{}, CreditsCharged{}) }

// State is a billing account folded from its stream.
type State struct {
	WorkspaceID string
	Credit      Credits // paid balance
	Usage       Credits // plan-included balance
	Entries     int
}

// Total is the spendable balance.
func (s State) Total() Credits { return s.Credit + s.Usage }

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case CreditsPurchased:
		s.WorkspaceID = ev.WorkspaceID
		s.Credit += ev.Amount
	case PlanRenewed:
		s.WorkspaceID = ev.WorkspaceID
		s.Usage = ev.Included
	case CreditsCharged:
		s.WorkspaceID = ev.WorkspaceID
		s.Usage -= ev.FromUsage
		s.Credit -= ev.FromCredit
	default:
		return s
	}
	s.Entries++
	return s
}

// MaxAmount bounds a single top-up or plan allowance (a billion credits).
const MaxAmount = Credits(1_000_000_000 * Milli)

// DecideTopUp adds paid credit.
func DecideTopUp(s State, workspaceID string, amount Credits, reference string, now time.Time) ([]domain.Event, error) {
	if amount <= 0 {
		return nil, domain.Invalid("amount", "must be greater than 0")
	}
	if amount > MaxAmount {
		return nil, domain.Invalid("amount", "must be at most %s", MaxAmount)
	}
	if len(reference) > 200 {
		return nil, domain.Invalid("reference", "must be at most 200 characters")
	}
	return []domain.Event{CreditsPurchased{WorkspaceID: workspaceID, Amount: amount, Reference: strings.TrimSpace(reference), At: now.UTC()}}, nil
}

// DecideRenew starts a new plan period with included credits.
func DecideRenew(s State, workspaceID string, included Credits, now time.Time) ([]domain.Event, error) {
	if included < 0 {
		return nil, domain.Invalid("included", "must not be negative")
	}
	if included > MaxAmount {
		return nil, domain.Invalid("included", "must be at most %s", MaxAmount)
	}
	return []domain.Event{PlanRenewed{WorkspaceID: workspaceID, Included: included, Lapsed: s.Usage, At: now.UTC()}}, nil
}

// Split divides a charge between the plan-included and paid balances, included first.
func (s State) Split(amount Credits) (fromUsage, fromCredit Credits) {
	fromUsage = min(amount, max(s.Usage, 0))
	return fromUsage, amount - fromUsage
}

// DecideCharge bills amount for cause; a balance that cannot cover it is ErrInsufficientCredits.
// A cause is charged once because the event's id derives from it: a repeat is absorbed by the
// store's idempotent append rather than by remembering every cause in this state.
func DecideCharge(s State, workspaceID, cause string, amount Credits, now time.Time) ([]domain.Event, error) {
	if amount < 0 {
		return nil, domain.Invalid("amount", "must not be negative")
	}
	if amount > s.Total() {
		return nil, domain.ErrInsufficientCredits
	}
	fromUsage, fromCredit := s.Split(amount)
	return []domain.Event{CreditsCharged{WorkspaceID: workspaceID, Cause: cause, Amount: amount, FromUsage: fromUsage, FromCredit: fromCredit, At: now.UTC()}}, nil
}
