package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

// The concurrency per key of workflow runs (docs/workflows.md, "Concurrency per key"): a run
// of a definition with a concurrency joins its key's queue in the commit of its trigger
// (triggerRun), and the scheduler settles the queue (RunQueues.Settle) when a run of it is
// triggered or ends: slots freed, waiting runs admitted in order.

var queueAgg = aggregate[run.Queue]{evolve: run.Queue.Evolve}

// QueueStream is the stream of a concurrency queue.
func QueueStream(id string) string { return eventstore.StreamName(run.QueueCategory, id) }

// MaxConcurrencyKeyLength bounds the key a concurrency key expression gives.
const MaxConcurrencyKeyLength = 1000

// concurrencyKey evaluates d's concurrency key over a trigger body, once, when the run is
// triggered: the run records it (run.Triggered), so the log says which queue it waits in. A
// body the key cannot be evaluated over is domain.ErrInvalid naming concurrency.key.
func concurrencyKey(ctx context.Context, d workflow.Definition, input json.RawMessage) (string, error) {
	if d.Concurrency == nil {
		return "", nil
	}
	p, err := payloadExpressions.get(d.Concurrency.Key)
	if err != nil {
		return "", domain.Invalid("concurrency.key", "%s", err) // validated when saved: cannot happen for a stored one
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	out, err := p.Eval(ctx, input)
	if err != nil {
		return "", domain.Invalid("concurrency.key", "cannot be evaluated over this trigger body: %s", err)
	}
	key := string(out)
	var s string
	if json.Unmarshal(out, &s) == nil {
		key = s // a string is the key itself; any other value its JSON text
	}
	if len(key) > MaxConcurrencyKeyLength || !utf8.ValidString(key) {
		return "", domain.Invalid("concurrency.key", "gives a key of %d bytes for this trigger body: at most %d bytes of UTF-8", len(key), MaxConcurrencyKeyLength)
	}
	return key, nil
}

// checkConcurrencyKey compiles a definition's concurrency key; the message says what does not
// compile.
func checkConcurrencyKey(src string) error {
	_, err := modules.CompilePayloadExpression("concurrency.key", src)
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		return errors.New(ve.Message)
	}
	return err
}

// triggerRun appends a new run's trigger, as decide gives it for a run that does not exist
// yet (domain.ErrAlreadyExists when it does). A run with a concurrency joins its queue in the
// same commit, so the queue holds every such run, in trigger order, whatever stops when; a
// run without one is appended exactly as before, one stream and one commit.
func triggerRun(ctx context.Context, h *Workflows, runID string, decide func(run.State) ([]domain.Event, error)) (run.State, error) {
	st, _, err := triggerRunStepped(ctx, h, runID, false, nil, eventstore.StreamAppend{}, decide)
	return st, err
}

// triggerRunStepped is triggerRun that, with stepFirst, writes a run without a concurrency
// with its first step in the trigger's commit (firstStep), and returns the module stages
// that commit dispatched, for the caller to hand to the scheduler (Workflows.wake). The
// trigger's commit takes claim, the signed request's (ErrReplayed when another request holds
// it, and nothing is written); nil takes none.
func triggerRunStepped(ctx context.Context, h *Workflows, runID string, stepFirst bool, claim *RequestClaim, check eventstore.StreamAppend, decide func(run.State) ([]domain.Event, error)) (run.State, []run.Stage, error) {
	events, err := decide(run.State{})
	if err != nil {
		return run.State{}, nil, err
	}
	var join run.QueueJoined
	queued := false
	if t, ok := events[0].(run.Triggered); ok {
		join, queued = run.JoinQueue(t)
	}
	if !queued {
		var dispatched []run.Stage
		if stepFirst {
			var folded run.State
			events, dispatched, folded = firstStep(ctx, h, events)
			if st, next, ok := triggerFirst(ctx, h, runID, events, folded, dispatched, claim, check); ok {
				return st, next, nil
			}
		}
		st, err := appendNewRun(ctx, h, runID, events, claim, check)
		return st, dispatched, err
	}
	joinData, err := encodeEvents(ctx, []domain.Event{join})
	if err != nil {
		return run.State{}, nil, err
	}
	// The queue's stream is appended to at Any: joins of one key do not conflict with each
	// other, and their commit order is the queue's order.
	st, err := appendNewRun(ctx, h, runID, events, claim, check,
		eventstore.StreamAppend{Stream: QueueStream(join.QueueID), Expected: eventstore.Any(), Events: joinData})
	return st, nil, err
}

// appendNewRun appends the first events of run runID, after check and with also (parts of
// other streams, when they name one) in the same commit, which takes claim;
// domain.ErrAlreadyExists when the run exists, ErrReplayed when another request holds the
// claim, check's *eventstore.WrongExpectedVersionError when it fails. The run's id is new, so
// its stream is not read first.
func appendNewRun(ctx context.Context, h *Workflows, runID string, events []domain.Event, claim *RequestClaim, check eventstore.StreamAppend, also ...eventstore.StreamAppend) (run.State, error) {
	runData, err := encodeEvents(ctx, events)
	if err != nil {
		return run.State{}, err
	}
	created := eventstore.StreamAppend{Stream: RunStream(runID), Expected: eventstore.NoStream(), Events: runData}
	if c, ok := claim.carried(); ok {
		created.Claims = []eventstore.Claim{c}
	}
	// The check first: a store whose parts are not atomic checks it before writing.
	parts, at := []eventstore.StreamAppend{created}, 0
	if check.Stream != "" {
		parts, at = []eventstore.StreamAppend{check, created}, 1
	}
	for _, p := range also {
		if p.Stream != "" {
			parts = append(parts, p)
		}
	}
	res, err := h.store.AppendMulti(ctx, parts...)
	if ce := (*eventstore.ClaimedError)(nil); errors.As(err, &ce) && claim.refusedBy(ce) {
		return run.State{}, fmt.Errorf("trigger run %s: %w", runID, ErrReplayed)
	}
	if staleWorkflow(err, check) {
		return run.State{}, fmt.Errorf("trigger run %s: %w", runID, err)
	}
	if isConflict(err) {
		return run.State{}, domain.ErrAlreadyExists
	}
	if err != nil {
		return run.State{}, fmt.Errorf("trigger run %s: %w", runID, err)
	}
	claim.committed()
	var st run.State
	for _, e := range events {
		st.Apply(e)
	}
	h.cache.put(RunStream(runID), loaded[run.State]{state: st, revision: res[at].NextRevision, exists: true})
	return st.Clone(), nil
}

// firstStep appends to a new run's trigger events the run's first step (the dispatch of what
// follows the trigger), so that trigger and dispatch are one commit where they took two, and
// returns the module stages it dispatched and the run as all those events leave it (its own
// copy). The scheduler starts them when this process wakes
// it with them (Workflows.wake), and otherwise when the log brings it the trigger: the first
// step of a run it did not wake starts the stages still CREATED (scheduler.take). A stop
// between the commit and their start is the sweep's, which submits a dispatched stage whose
// execution is missing.
func firstStep(ctx context.Context, h *Workflows, events []domain.Event) ([]domain.Event, []run.Stage, run.State) {
	var s run.State
	for _, e := range events {
		s.Apply(e)
	}
	more, dispatched := run.StepWith(s, nil, runEval(ctx), h.now())
	if len(more) == 0 {
		return events, nil, s
	}
	for _, e := range more {
		s.Apply(e) // s is this fold's own: StepWith decided on a copy
	}
	all := make([]domain.Event, 0, len(events)+len(more))
	return append(append(all, events...), more...), dispatched, s
}

// Queue folds a concurrency queue; an unknown queue is domain.ErrNotFound.
func (h *RunQueues) Queue(ctx context.Context, id string) (run.Queue, error) {
	l, err := load(ctx, h, QueueStream(id), queueAgg)
	if err != nil {
		return run.Queue{}, err
	}
	if !l.exists {
		return run.Queue{}, fmt.Errorf("queue %s: %w", id, domain.ErrNotFound)
	}
	return l.state, nil
}

// Settle frees the slots of the runs of queue id that ended (ended: from their RunFinished)
// and admits its waiting runs, in order, while slots are free: each admitted run's RunAdmitted
// is appended in the queue's commit, at the revisions read, so concurrent settles (a lead
// scheduler and one taking over) cannot give one slot twice. It returns the runs admitted,
// for the caller to step. A waiting run found ended when its turn comes leaves the queue.
func (h *RunQueues) Settle(ctx context.Context, id string, ended []string) ([]string, error) {
	stream := QueueStream(id)
	for attempt := 0; ; attempt++ {
		q, err := load(ctx, h, stream, queueAgg)
		if err != nil || !q.exists {
			return nil, err
		}
		d, err := h.decideSettle(ctx, q, ended)
		if err != nil || len(d.parts) == 0 {
			return nil, err
		}
		res, err := h.store.AppendMulti(ctx, d.parts...)
		if isConflict(err) && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			return nil, wrap("settle queue "+id, err)
		}
		// What was appended is known: the next settle and the admitted runs' first steps read
		// on from here instead of from the start of their streams.
		for _, e := range d.queueEvents {
			q.state = q.state.Evolve(e)
		}
		h.cache.put(stream, loaded[run.Queue]{state: q.state, revision: res[0].NextRevision, exists: true})
		for i, r := range d.runs {
			for _, e := range d.runEvents[i] {
				r.state.Apply(e)
			}
			h.cache.put(RunStream(r.state.ID), loaded[run.State]{state: r.state, revision: res[i+1].NextRevision, exists: true})
		}
		return d.admitted, nil
	}
}

// settlement is what one settle appends: the queue's events, then each admitted run's.
type settlement struct {
	parts       []eventstore.StreamAppend
	queueEvents []domain.Event
	runs        []loaded[run.State]
	runEvents   [][]domain.Event
	admitted    []string
}

// decideSettle is Settle's decision on queue q as read. The runs it would admit are read first:
// one that ended meanwhile (its end not yet settled) leaves instead, and the queue is decided
// again.
func (h *RunQueues) decideSettle(ctx context.Context, q loaded[run.Queue], ended []string) (settlement, error) {
	now := h.now()
	left := slices.Clone(ended)
	for range len(q.state.Waiting) + 1 {
		events, admit := run.DecideQueue(q.state, left, now)
		if len(events) == 0 {
			return settlement{}, nil
		}
		d := settlement{queueEvents: events, admitted: admit}
		dead := false
		for _, rid := range admit {
			r, err := load(ctx, h, RunStream(rid), runAgg)
			if err != nil {
				return settlement{}, err
			}
			adm := run.DecideAdmit(r.state, now)
			if len(adm) == 0 {
				left, dead = append(left, rid), true
				continue
			}
			data, err := encodeEvents(ctx, adm)
			if err != nil {
				return settlement{}, err
			}
			d.parts = append(d.parts, eventstore.StreamAppend{Stream: RunStream(rid), Expected: r.expected(), Events: data})
			d.runs, d.runEvents = append(d.runs, r), append(d.runEvents, adm)
		}
		if dead {
			continue
		}
		data, err := encodeEvents(ctx, events)
		if err != nil {
			return settlement{}, err
		}
		d.parts = append([]eventstore.StreamAppend{{Stream: QueueStream(q.state.ID), Expected: q.expected(), Events: data}}, d.parts...)
		return d, nil
	}
	return settlement{}, nil
}

// Repair puts right what a store whose multi-stream appends are not atomic (KurrentDB,
// docs/kurrentdb.md) can leave behind when a process dies between the parts of one: a run
// waiting for queue id that never joined it (it joins now, at the end of the line), and a run
// the queue admitted whose RunAdmitted is missing (appended now). waiting are the runs the
// read model shows waiting in the queue, read before the queue is: a run it shows has its
// trigger, and on PostgreSQL its join, in the log. It returns the runs admitted, for the caller
// to step; the caller settles the queue after.
func (h *RunQueues) Repair(ctx context.Context, id string, waiting []string) ([]string, error) {
	q, err := load(ctx, h, QueueStream(id), queueAgg)
	if err != nil {
		return nil, err
	}
	var admitted []string
	for _, rid := range waiting {
		if slices.Contains(q.state.Waiting, rid) {
			continue
		}
		r, err := load(ctx, h, RunStream(rid), runAgg)
		if err != nil {
			return admitted, err
		}
		if slices.Contains(q.state.Running, rid) {
			adm := run.DecideAdmit(r.state, h.now())
			if len(adm) == 0 {
				continue // the read model is behind: it was admitted
			}
			if _, err := appendEvents(ctx, h, RunStream(rid), r.expected(), adm); err != nil && !isConflict(err) {
				return admitted, err
			}
			admitted = append(admitted, rid)
			continue
		}
		join, ok := run.RejoinQueue(r.state, h.now())
		if !ok || join.QueueID != id {
			continue
		}
		if _, err := appendEvents(ctx, h, QueueStream(id), eventstore.Any(), []domain.Event{join}); err != nil {
			return admitted, err
		}
	}
	return admitted, nil
}
