package commands

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
)

// Outcome is what a run of an execution's attempt came to. The executor runs the module and
// says what happened; commands decides the events (Attempts.ClaimAndFinish, ChargedFinish).
type Outcome struct {
	// Worker ran the attempt.
	Worker string
	// Attempt is the attempt that ran; 0 for the one the execution holds when the outcome is
	// decided (the attempt that a claim made with the outcome starts).
	Attempt int
	// Output is a completed run's output, billed Usage.
	Output json.RawMessage
	Usage  billing.Credits
	// Failure, when set, is a failed run's error instead. The attempt is retried while
	// attempts remain and Retry is true, after Backoff of the failed attempt (none when nil);
	// a stage's retry policy, when its execution has one, decides both instead
	// (execution.DecideFail).
	Failure json.RawMessage
	Retry   bool
	Backoff func(attempt int) time.Duration
}

// errFailedFirst refuses a failure recorded with its submit: a call run first is recorded
// only when it completed (execution.DecideCompleteFirst).
var errFailedFirst = errors.New("a call run first is recorded with its submit only when it completed")

// decide is the outcome's events on s at now.
func (o Outcome) decide(s execution.State, now time.Time) ([]domain.Event, error) {
	attempt := o.Attempt
	if attempt == 0 {
		attempt = s.Attempt
	}
	if o.Failure == nil {
		return execution.DecideComplete(s, o.Worker, attempt, o.Output, o.Usage, now)
	}
	var backoff time.Duration
	if o.Backoff != nil {
		backoff = o.Backoff(attempt)
	}
	return execution.DecideFail(s, o.Worker, attempt, o.Failure, o.Retry, backoff, now)
}

// decideFirst is the outcome's events on s, an execution its submit has just made and no
// one has claimed: a completion with no claim written.
func (o Outcome) decideFirst(s execution.State, now time.Time) ([]domain.Event, error) {
	if o.Failure != nil {
		return nil, errFailedFirst
	}
	return execution.DecideCompleteFirst(s, o.Worker, o.Output, o.Usage, now)
}

// claimThen is the claim of s's next attempt by o's worker, leased for lease, then o decided
// on the claimed state.
func claimThen(s execution.State, lease time.Duration, o Outcome, now time.Time) ([]domain.Event, error) {
	claim, err := execution.DecideStart(s, o.Worker, lease, now)
	if err != nil {
		return nil, err
	}
	started := s
	for _, e := range claim {
		started = started.Evolve(e)
	}
	outcome, err := o.decide(started, now)
	if err != nil {
		return nil, err
	}
	return append(claim, outcome...), nil
}
