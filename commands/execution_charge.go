package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// ErrNotCombined is ChargeAndFinish's answer when the batch could not be written in one go (a
// stream moved under it, a cause was charged before): nothing of the batch was written, and
// the caller charges and records each execution the separate way.
var ErrNotCombined = errors.New("charges and outcomes not combined")

// errNotCreated is the result of an item with Create whose outcome could not be decided: neither it
// nor its charge was written.
var errNotCreated = errors.New("execution not created: its outcome could not be decided")

// ChargedFinish is one execution's charge and the outcome recorded with it.
type ChargedFinish struct {
	ExecutionID string
	Charge      ChargeRequest
	// Outcome is recorded with the charge, decided on the execution's current state once its
	// charge is made; an outcome that cannot be decided leaves the execution as it is (the
	// charge is still made, as a charge made before a separate outcome append would be).
	Outcome Outcome
	// ClaimFor, when set, claims the execution's next attempt for the outcome's worker, leased
	// for ClaimFor, in the same append and before the outcome (ClaimAndFinish).
	ClaimFor time.Duration
	// Create, when set, are the events that create the execution (its submit): it does not
	// exist yet, and they are written first in the same append, which expects no stream. The
	// outcome is then a completion with no claim (Outcome.decideFirst).
	Create []domain.Event
	// CreateMeta is the metadata of the request that made Create; the batch's other events
	// carry the context's.
	CreateMeta Metadata
	// Claim, when set with Create or Combined, is the signature claim of the request that made
	// Create (or reports the outcome), taken in the batch's commit on a store that takes
	// claims. An item whose claim another request holds is left out and answered ErrReplayed;
	// the rest of the batch is written.
	Claim *RequestClaim
	// Combined makes the charge only together with the outcome: when the outcome cannot be
	// decided on the state the batch knows, or the batch cannot be written in one go, the item
	// is answered ErrNotCombined and nothing of it is written. A worker's completion decided on
	// a cached state uses it: should that state be stale (its lease lost), the call must not be
	// charged for an outcome that is then refused; its caller reads afresh and tries again.
	Combined bool
	// Window, when set with Create, opens the cache window the execution leads, in the same
	// commit. An item whose window another call opened first is left out and answered
	// errWindowTaken; the rest of the batch is written.
	Window *WindowOpening
	// Step, when set with Create, records the outcome on the execution's run and dispatches
	// what follows in the same commit (StageStep).
	Step *StageStep
}

// errWindowTaken is the result of an item with Window whose window another call opened first:
// nothing of it was written, and its submit takes the usual path, finding the window's leader.
var errWindowTaken = errors.New("cache window opened by another call")

// FinishResult is the fate of one ChargedFinish.
type FinishResult struct {
	// Err is nil when charged, ErrInsufficientCredits when the balance could not cover it
	// (nothing written for this item), an error matching eventstore.ErrUnstorable when the
	// events Finish decided cannot be stored (nothing written, nothing charged), or another
	// error when an item with Create could not be decided or, written alone after its batch
	// was refused, could not be written (nothing written either).
	Err error
	// Recorded reports that the item's outcome was written with the charge; State is then the
	// execution after it.
	Recorded bool
	State    execution.State
}

// ChargeAndFinish bills the items' charges to one workspace and records each execution's
// outcome in the same atomic append (eventstore.Store.AppendMulti): one commit for a batch of
// finishing executions instead of one for the charges and one per outcome. It decides on the
// cached states it has, so it usually reads nothing. A stale account (another process charged
// the workspace) is read again and the batch decided anew; a stale execution fails the whole
// batch with ErrNotCombined, for the caller to take the separate path.
func (h *Charges) ChargeAndFinish(ctx context.Context, workspaceID string, items []ChargedFinish) ([]FinishResult, error) {
	items = slices.Clone(items) // a refused step is taken out of the batch (dropSteps)
	results := make([]FinishResult, len(items))
	live := make([]int, len(items)) // the items still in the batch
	for i := range items {
		live[i] = i
	}
	for {
		batch := make([]ChargedFinish, len(live))
		for j, i := range live {
			batch[j] = items[i]
		}
		res, err := h.chargeAndFinishRetried(ctx, workspaceID, batch)
		if errors.Is(err, eventstore.ErrUnstorable) && len(live) > 1 {
			// The store refused one member's events, past the check planCharges makes: each
			// is written alone, so only that one fails.
			h.oneByOne(ctx, workspaceID, items, live, results)
			return results, nil
		}
		if stream, ok := runConflict(err); ok {
			// The run moved since the scheduler stepped it: write the batch without its step.
			// (A run the batch was to create exists: its item is left out.)
			rest, changed := dropSteps(items, live, results, stream)
			if changed {
				h.cache.drop(stream)
				if live = rest; len(live) == 0 {
					return results, nil
				}
				continue
			}
		}
		if stream, ok := windowConflict(err); ok {
			// Another call opened an item's window first: answer it, and every other item
			// whose window stands elsewhere than it guessed, and write the others.
			h.cache.drop(stream)
			taken := h.takenWindows(ctx, items, live, stream)
			rest := leaveOut(live, results, errWindowTaken, func(i int) bool { return taken[i] })
			if len(rest) == len(live) {
				return nil, fmt.Errorf("charge and finish in %s: %w", workspaceID, err)
			}
			if live = rest; len(live) == 0 {
				return results, nil
			}
			continue
		}
		var ce *eventstore.ClaimedError
		if !errors.As(err, &ce) {
			if err != nil {
				return nil, err
			}
			for j, i := range live {
				results[i] = res[j]
				if res[j].Recorded {
					items[i].Claim.committed()
				}
			}
			return results, nil
		}
		// A replay's claim refused the whole commit: answer it and write the others.
		rest := leaveOut(live, results, ErrReplayed, func(i int) bool { return items[i].Claim.refusedBy(ce) })
		if len(rest) == len(live) {
			return nil, fmt.Errorf("charge and finish in %s: %w", workspaceID, err)
		}
		if live = rest; len(live) == 0 {
			return results, nil
		}
	}
}

// leaveOut answers err to the items at live that out picks and returns the others.
func leaveOut(live []int, results []FinishResult, err error, out func(int) bool) []int {
	rest := live[:0:0]
	for _, i := range live {
		if out(i) {
			results[i].Err = err
		} else {
			rest = append(rest, i)
		}
	}
	return rest
}

// windowConflict reports the cache window's stream an append was refused on.
func windowConflict(err error) (string, bool) {
	var wrong *eventstore.WrongExpectedVersionError
	if errors.As(err, &wrong) && eventstore.Category(wrong.Stream) == execution.CacheCategory {
		return wrong.Stream, true
	}
	return "", false
}

// windowReads bounds the reads takenWindows makes at once.
const windowReads = 8

// takenWindows picks the items at live whose cache window another call opened first: the one
// at stream, which refused the batch, and those a read now finds elsewhere than their opening
// expects. A process that does not know a window (after a restart, on another instance, or
// once it left the state cache) guesses it is not open, and identical calls come together: a
// batch of them was refused once for each, a commit's round trip apiece, where it is now read
// once, in parallel, and refused once. An unreadable window keeps its item: the append
// checks it.
func (h *Charges) takenWindows(ctx context.Context, items []ChargedFinish, live []int, stream string) map[int]bool {
	taken := map[int]bool{}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(windowReads)
	for _, i := range live {
		w := items[i].Window
		if w == nil {
			continue
		}
		if w.opens(stream) {
			taken[i] = true
			continue
		}
		g.Go(func() error {
			now, err := load(ctx, h, w.stream, cacheWindowAgg)
			if err == nil && (now.exists != w.read.exists || now.revision != w.read.revision) {
				mu.Lock()
				taken[i] = true
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait() //nolint:errcheck // each read's error keeps its item in the batch
	return taken
}

// opens reports whether w opens the window at stream (false for nil).
func (w *WindowOpening) opens(stream string) bool { return w != nil && w.stream == stream }

// oneByOne charges and finishes the items at live each in an append of its own, with its own
// result: an error of one is that item's alone.
func (h *Charges) oneByOne(ctx context.Context, workspaceID string, items []ChargedFinish, live []int, results []FinishResult) {
	for _, i := range live {
		res, err := h.ChargeAndFinish(ctx, workspaceID, items[i:i+1])
		if err != nil {
			results[i].Err = err
			continue
		}
		results[i] = res[0]
	}
}

// chargeAndFinishRetried is ChargeAndFinish for a batch that takes no claim another request
// holds.
func (h *Charges) chargeAndFinishRetried(ctx context.Context, workspaceID string, items []ChargedFinish) ([]FinishResult, error) {
	readOn := false
	for attempt := 0; ; attempt++ {
		results, err := h.chargeAndFinish(ctx, workspaceID, items, readOn)
		var wrong *eventstore.WrongExpectedVersionError
		if errors.As(err, &wrong) && wrong.Stream == BillingStream(workspaceID) && attempt < maxConflictRetries {
			// Another process charged the account meanwhile: read on and decide anew, and
			// take turns with it for a while (takeTurn).
			h.contended.Store(wrong.Stream, time.Now())
			readOn = true
			continue
		}
		if _, ok := windowConflict(err); ok {
			return nil, fmt.Errorf("charge and finish in %s: %w", workspaceID, err)
		}
		if _, ok := runConflict(err); ok {
			return nil, fmt.Errorf("charge and finish in %s: %w", workspaceID, err)
		}
		if isConflict(err) || errors.Is(err, eventstore.ErrIdempotencyConflict) {
			h.cache.drop(BillingStream(workspaceID))
			for _, it := range items {
				h.cache.drop(ExecutionStream(it.ExecutionID))
			}
			return nil, fmt.Errorf("charge and finish in %s: %w", workspaceID, ErrNotCombined)
		}
		if err != nil {
			return nil, fmt.Errorf("charge and finish in %s: %w", workspaceID, err)
		}
		return results, nil
	}
}

// chargeAndFinish is one try of ChargeAndFinish; it returns the store's error as it is. Within
// a turn on the account (takeTurn), or with readOn, it reads the account's events after the
// cached state before deciding.
func (h *Charges) chargeAndFinish(ctx context.Context, workspaceID string, items []ChargedFinish, readOn bool) ([]FinishResult, error) {
	stream := BillingStream(workspaceID)
	appendMulti := h.store.AppendMulti
	var acct loaded[billing.State]
	var err error
	cur, from, _ := cachedState(h, stream, billingAgg)
	turn := h.takeTurn(ctx, stream, from)
	switch {
	case turn != nil:
		defer turn.End()
		acct, err = loadFrom(h, stream, billingAgg, cur, turn.Events())
		appendMulti = turn.AppendMulti
	case readOn:
		acct, err = load(ctx, h, stream, billingAgg)
	default:
		acct, err = h.cachedAccount(ctx, workspaceID)
	}
	if err != nil {
		return nil, err
	}
	plan, err := h.planCharges(ctx, workspaceID, items, acct)
	if err != nil || plan.charges == 0 {
		return plan.results, err
	}
	res, err := appendMulti(ctx, plan.parts...)
	if err != nil {
		return nil, err
	}
	return h.chargesWritten(items, plan, res), nil
}

// chargePlan is a charge batch decided on an account: the append that writes it, and what it
// makes of each item.
type chargePlan struct {
	stream  string
	acct    loaded[billing.State] // the account after the batch, at the revision before it
	charges int                   // events the batch appends to the account
	parts   []eventstore.StreamAppend
	results []FinishResult
	after   []loaded[execution.State]
	partOf  []int // index in parts of item i's execution part, 0 for none
	// windows are the cache windows the batch opens, by stream: the index of the part, and
	// the window after it.
	windows map[string]openedWindow
	// steps are the run steps the batch carries (StageStep).
	steps []plannedStep
}

type openedWindow struct {
	part  int
	after loaded[execution.CacheWindow]
}

// planCharges decides items' charges on acct and each item's outcome on its execution's
// state. An item that cannot be charged or created keeps its error in results and is left out.
func (h *Charges) planCharges(ctx context.Context, workspaceID string, items []ChargedFinish, acct loaded[billing.State]) (chargePlan, error) {
	plan := chargePlan{
		stream:  BillingStream(workspaceID),
		results: make([]FinishResult, len(items)),
		after:   make([]loaded[execution.State], len(items)),
		partOf:  make([]int, len(items)),
	}
	plan.parts = []eventstore.StreamAppend{{Stream: plan.stream, Expected: acct.expected()}}
	var charges []domain.Event
	for i, it := range items {
		if len(it.Create) > 0 && it.Claim.replayed() {
			plan.results[i].Err = ErrReplayed // its caller has answered 401: never create it
			continue
		}
		evs, err := billing.DecideCharge(acct.state, workspaceID, it.Charge.Cause, it.Charge.Amount, h.now())
		if err != nil {
			plan.results[i].Err = err
			continue
		}
		part, next, ok, err := h.finishPart(ctx, it)
		if err != nil {
			return chargePlan{}, err
		}
		// The outcome, after the submit's events (checked when it was made).
		if err := storable(part.Events[min(len(it.Create), len(part.Events)):]); err != nil {
			plan.results[i].Err = err // never charged: its outcome cannot be written
			continue
		}
		if c, carry := it.Claim.carried(); ok && carry && (len(it.Create) > 0 || it.Combined) && h.takesClaims() {
			part.Claims = []eventstore.Claim{c}
		}
		if !ok && it.Combined {
			plan.results[i].Err = ErrNotCombined // no charge without its outcome
			continue
		}
		if !ok && len(it.Create) > 0 {
			plan.results[i].Err = errNotCreated // no charge for an execution that would not exist
			continue
		}
		var window eventstore.StreamAppend
		var opened loaded[execution.CacheWindow]
		if ok && len(it.Create) > 0 && it.Window != nil {
			if _, dup := plan.windows[it.Window.stream]; dup {
				plan.results[i].Err = errWindowTaken // an identical call earlier in the batch leads it
				continue
			}
			if window, opened, err = it.Window.part(ctx); err != nil {
				return chargePlan{}, err
			}
		}
		// An item whose step creates its run or dispatched its stage stands or falls with it:
		// the step is planned first.
		if ok && it.stepRequired() && !h.planStep(ctx, &plan, i, it, next.state) {
			plan.results[i].Err = errNotCreated
			continue
		}
		for _, e := range evs {
			acct.state = acct.state.Evolve(e)
		}
		charges = append(charges, evs...)
		if ok {
			plan.parts, plan.partOf[i], plan.after[i] = append(plan.parts, part), len(plan.parts), next
			if !it.stepRequired() {
				h.planStep(ctx, &plan, i, it, next.state)
			}
		}
		if window.Stream != "" {
			if plan.windows == nil {
				plan.windows = map[string]openedWindow{}
			}
			plan.windows[window.Stream], plan.parts = openedWindow{len(plan.parts), opened}, append(plan.parts, window)
		}
	}
	plan.acct, plan.charges = acct, len(charges)
	if len(charges) == 0 {
		return plan, nil
	}
	return plan, encodeParts(ctx, plan.parts, charges)
}

// chargesWritten caches what a written plan (res, the store's results) made of the account and
// the executions, and returns the items' results.
func (h *Charges) chargesWritten(items []ChargedFinish, plan chargePlan, res []eventstore.AppendResult) []FinishResult {
	acct := plan.acct
	acct.revision, acct.exists = res[0].NextRevision, true
	h.cache.put(plan.stream, acct)
	for stream, w := range plan.windows {
		w.after.revision, w.after.exists = res[w.part].NextRevision, true
		h.cache.put(stream, w.after)
	}
	h.stepsWritten(items, plan, res)
	for i, it := range items {
		if p := plan.partOf[i]; p > 0 {
			next := plan.after[i]
			next.revision = res[p].NextRevision
			h.cache.put(ExecutionStream(it.ExecutionID), next)
			plan.results[i].Recorded, plan.results[i].State = true, next.state
		}
	}
	return plan.results
}

// cachedAccount is the workspace's cached billing state when there is one, without a read: a
// stale one fails its append on revision. Otherwise it folds the stream.
func (h *Charges) cachedAccount(ctx context.Context, workspaceID string) (loaded[billing.State], error) {
	stream := BillingStream(workspaceID)
	if c, ok := h.cache.get(stream); ok {
		if l, ok := c.(loaded[billing.State]); ok {
			return l, nil
		}
	}
	return load(ctx, h, stream, billingAgg)
}

// finish is the item's outcome decided on s at now: after its submit (Create), after a claim
// (ClaimFor), or on its own.
func (it ChargedFinish) finish(s execution.State, now time.Time) ([]domain.Event, error) {
	switch {
	case len(it.Create) > 0:
		return it.Outcome.decideFirst(s, now)
	case it.ClaimFor > 0:
		return claimThen(s, it.ClaimFor, it.Outcome, now)
	}
	return it.Outcome.decide(s, now)
}

// finishPart is the append of the item's outcome at the execution's known revision, and the state
// after it; ok is false when the outcome decides nothing or is refused (the caller records it alone).
func (h *Charges) finishPart(ctx context.Context, it ChargedFinish) (eventstore.StreamAppend, loaded[execution.State], bool, error) {
	if len(it.Create) > 0 {
		return createPart(ctx, it, h.now())
	}
	stream := ExecutionStream(it.ExecutionID)
	var cur loaded[execution.State]
	if c, ok := h.cache.get(stream); ok {
		cur, ok = c.(loaded[execution.State])
		if !ok {
			return eventstore.StreamAppend{}, cur, false, nil
		}
	} else {
		var err error
		if cur, err = load(ctx, h, stream, executionAgg); err != nil {
			return eventstore.StreamAppend{}, cur, false, err
		}
	}
	if !cur.state.Exists {
		return eventstore.StreamAppend{}, cur, false, nil
	}
	events, err := it.finish(cur.state, h.now())
	if err != nil || len(events) == 0 {
		return eventstore.StreamAppend{}, cur, false, nil
	}
	data, err := encodeEvents(ctx, events)
	if err != nil {
		return eventstore.StreamAppend{}, cur, false, err
	}
	for _, e := range events {
		cur.state = cur.state.Evolve(e)
	}
	return eventstore.StreamAppend{Stream: stream, Expected: cur.expected(), Events: data}, cur, true, nil
}

// createPart is the append that creates its execution with its outcome: the Create events,
// then the outcome decided on the state they make.
func createPart(ctx context.Context, it ChargedFinish, now time.Time) (eventstore.StreamAppend, loaded[execution.State], bool, error) {
	cur := loaded[execution.State]{}
	for _, e := range it.Create {
		cur.state = cur.state.Evolve(e)
	}
	outcome, err := it.finish(cur.state, now)
	if err != nil || len(outcome) == 0 {
		return eventstore.StreamAppend{}, cur, false, nil
	}
	created, err := encodeEvents(WithMetadata(ctx, it.CreateMeta), it.Create)
	if err != nil {
		return eventstore.StreamAppend{}, cur, false, err
	}
	finished, err := encodeEvents(ctx, outcome)
	if err != nil {
		return eventstore.StreamAppend{}, cur, false, err
	}
	for _, e := range outcome {
		cur.state = cur.state.Evolve(e)
	}
	cur.exists = true
	return eventstore.StreamAppend{Stream: ExecutionStream(it.ExecutionID), Expected: eventstore.NoStream(),
		Events: append(created, finished...)}, cur, true, nil
}

// encodeParts fills the first part (the billing stream's) with the encoded charges.
func encodeParts(ctx context.Context, parts []eventstore.StreamAppend, charges []domain.Event) error {
	data, err := encodeEvents(ctx, charges)
	if err != nil {
		return err
	}
	parts[0].Events = data
	return nil
}

// storable checks that the store can hold events before they go into a batch, where one
// item's refusal would refuse the others (a module output holding a NUL character, a number
// beyond PostgreSQL's numeric).
func storable(events []eventstore.EventData) error {
	for _, e := range events {
		if err := domain.CheckStorableData("event", e.Data); err != nil {
			return fmt.Errorf("%s: %w: %w", e.Type, eventstore.ErrUnstorable, err)
		}
	}
	return nil
}
