package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

// Bounds of the callback fields of a submit.
const (
	MaxCallbackURL     = 2048
	MaxCallbackSecret  = 1024
	MaxCallbackHeaders = 20
	MaxHeaderValue     = 4096
)

// SubmitExecution is a submit as a client sent it (SPEC.md 4.1), already parsed into fields of
// the right JSON types. The command checks everything else before anything is appended: the
// module, its config and input, text the event log cannot store, the callback; it prices the
// call from the module and seals the callback's secrets.
type SubmitExecution struct {
	WorkspaceID string
	APIKeyID    string
	Module      string
	Input       json.RawMessage
	Config      json.RawMessage
	Attempts    int
	Callback    CallbackRequest
	// IdempotencyKey, when set, maps every submit with the same key and BodyHash in 24 hours
	// to one execution.
	IdempotencyKey string
	BodyHash       string
	// CacheWindow is how long an identical call is free after the first; 0 disables it.
	CacheWindow time.Duration
	// WaitFor is how long the submit may wait for the execution to end when this process
	// runs it (waitForMs); the answer is then the ended state. 0 answers at once.
	WaitFor time.Duration
	// Claim, when set, is the signed request's use-once claim on its signature: the command
	// takes it before its first append, or in the commit of a call run first (RequestClaim).
	Claim *RequestClaim
}

// CallbackRequest is the terminal webhook a submit asks for, in the clear: the command seals
// Secret and the header values before they enter an event.
type CallbackRequest struct {
	URL     string
	Secret  string
	Headers map[string]string
}

// SubmitExecution accepts an execution and returns its state right after the submit. A call
// the cache window covers reuses the first call's output for free; otherwise the workspace's
// spendable balance must cover the module's cost (ErrInsufficientCredits). A refused submit
// appends nothing: every check runs before the first append. The steps, in order, are the
// methods of submission (submission.go).
func (h *Executions) SubmitExecution(ctx context.Context, c SubmitExecution) (_ execution.State, err error) {
	defer func() {
		if err != nil && !errors.Is(err, ErrReplayed) {
			// Nothing was recorded, but the signature is used all the same: a replay must not
			// find the refused call accepted later (credits topped up meanwhile, say).
			c.Claim.SettleLate(ctx) //nolint:errcheck // the call's own error is the answer
		}
	}()
	s, err := h.newSubmission(ctx, c)
	if err != nil {
		return execution.State{}, err
	}
	defer s.releaseHandoff()
	if prev, found, err := s.earlierExecution(ctx); found || err != nil {
		return prev, err
	}
	if err := s.findCacheWindow(ctx); err != nil {
		return execution.State{}, err
	}
	if err := s.checkBalance(ctx); err != nil {
		return execution.State{}, err
	}
	if err := s.findLeaderOutput(ctx); err != nil {
		return execution.State{}, err
	}
	// Every check has passed: from here on, only appends.
	if err := s.takeSignature(ctx); err != nil {
		return execution.State{}, err
	}
	if prev, found, err := s.bindIdempotencyKey(ctx); found || err != nil {
		return prev, err
	}
	if st, recorded, err := s.recordFree(ctx); recorded || err != nil {
		return st, err
	}
	if st, recorded, err := s.runFirst(ctx); recorded || err != nil {
		return st, err
	}
	if err := s.openCacheWindow(ctx); err != nil {
		return execution.State{}, err
	}
	if st, recorded, err := s.recordFreeAfterAll(ctx); recorded || err != nil {
		return st, err
	}
	return s.appendSubmit(ctx)
}

// runFirst hands a call of a repeatable module to the local runner before its submit is
// appended, so that submit, outcome and charge take one commit, and the execution's
// row is written once, finished. A call that waits gets the state recorded; one that does not
// gets the submitted state (SPEC.md 4.1: CREATED), though the run is recorded by then. A call
// that opens a cache window opens it in that commit (open). Calls bound to an idempotency key,
// and free calls of an open window, take the usual path: their first append is elsewhere. When
// the runner does not record the call, the submitted state it was given is returned with false
// (zero when the call was not handed over).
func (h *Executions) runFirst(ctx context.Context, runner Runner, c SubmitExecution, sub execution.Submit, open *WindowOpening) (execution.State, bool) {
	if !h.runsFirst(c, sub) {
		return execution.State{}, false
	}
	events, err := execution.DecideSubmit(execution.State{}, sub, h.now())
	if err != nil {
		return execution.State{}, false
	}
	var st execution.State
	for _, e := range events {
		st = st.Evolve(e)
	}
	run := FirstRun{State: st, Create: events, Claim: c.Claim, Window: open}
	if c.WaitFor > 0 {
		if after, ok := runner.RunFirst(ctx, run, c.WaitFor); ok {
			return after, true
		}
		return st, false
	}
	_, ok := runner.TryRunFirst(ctx, run)
	return st, ok
}

// runsFirst reports whether the call may be run before its submit is appended (runFirst).
func (h *Executions) runsFirst(c SubmitExecution, sub execution.Submit) bool {
	if c.IdempotencyKey != "" || sub.CachedFrom != "" || sub.CostMilli <= 0 {
		return false
	}
	m, ok := h.modules.Get(c.Module)
	return ok && modules.IsRepeatable(m)
}

// completedExecution is execution id when it has completed, else the zero state. A completed
// execution in the state cache is taken as it is: it never changes again.
func (h *Executions) completedExecution(ctx context.Context, id string) (execution.State, error) {
	stream := ExecutionStream(id)
	cur, _, _ := cachedState(h, stream, executionAgg)
	if cur.state.Status != execution.StatusCompleted {
		var err error
		if cur, err = load(ctx, h, stream, executionAgg); err != nil {
			return execution.State{}, err
		}
	}
	if cur.state.Status != execution.StatusCompleted {
		return execution.State{}, nil
	}
	return cur.state, nil
}

// recordFree appends, in one commit that takes the request's claim, the submit of a free call
// (sub.CachedFrom) and its completion with leader's output, with no usage: the execution a free
// call would otherwise wait for the executor to complete the same way (executor.follow). It
// returns the state as submitted and as completed.
func (h *Executions) recordFree(ctx context.Context, sub execution.Submit, leader execution.State, claim *RequestClaim) (execution.State, execution.State, error) {
	now := h.now()
	events, err := execution.DecideSubmit(execution.State{}, sub, now)
	if err != nil {
		return execution.State{}, execution.State{}, wrap("submit execution", err)
	}
	var submitted execution.State
	for _, e := range events {
		submitted = submitted.Evolve(e)
	}
	done, err := Outcome{Worker: sub.Runner, Output: leader.Output}.decideFirst(submitted, now)
	if err != nil {
		return execution.State{}, execution.State{}, wrap("submit execution", err)
	}
	ended := submitted
	for _, e := range done {
		ended = ended.Evolve(e)
	}
	if err := appendNewExecution(ctx, h, sub.ExecutionID, append(events, done...), ended, claim); err != nil {
		return execution.State{}, execution.State{}, err
	}
	return submitted, ended, nil
}

// appendNewExecution appends the first events of an execution, in one commit that takes claim (the
// request's signature: ErrReplayed when another request holds it, and nothing is written), and
// caches st, the state they leave.
func appendNewExecution(ctx context.Context, h *Executions, executionID string, events []domain.Event, st execution.State, claim *RequestClaim) error {
	data, err := encodeEvents(ctx, events)
	if err != nil {
		return err
	}
	stream := ExecutionStream(executionID)
	part := eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream(), Events: data}
	if c, ok := claim.carried(); ok {
		part.Claims = []eventstore.Claim{c}
	}
	res, err := h.store.AppendMulti(ctx, part)
	if ce := (*eventstore.ClaimedError)(nil); errors.As(err, &ce) && claim.refusedBy(ce) {
		return fmt.Errorf("submit execution: %w", ErrReplayed)
	}
	if err != nil {
		return wrap("submit execution", err)
	}
	claim.committed()
	h.cache.put(stream, loaded[execution.State]{state: st, revision: res[0].NextRevision, exists: true})
	return nil
}

// appendSubmit appends the submit and reports whether this call created the execution. A
// fresh id cannot have a stream yet, so it is appended without reading one first.
func (h *Executions) appendSubmit(ctx context.Context, sub execution.Submit) (execution.State, bool, error) {
	var state execution.State
	decide := func(s execution.State) ([]domain.Event, error) {
		events, err := execution.DecideSubmit(s, sub, h.now())
		state = s
		for _, e := range events {
			state = state.Evolve(e)
		}
		return events, err
	}
	events, err := decide(execution.State{})
	if err != nil {
		return execution.State{}, false, wrap("submit execution", err)
	}
	stream := ExecutionStream(sub.ExecutionID)
	res, err := appendEvents(ctx, h, stream, eventstore.NoStream(), events)
	if isConflict(err) { // submits of one idempotency key racing to create its execution
		_, err = execute(ctx, h, stream, executionAgg, decide)
		if errors.Is(err, domain.ErrAlreadyExists) {
			st, err := h.Execution(ctx, sub.ExecutionID)
			return st, false, err
		}
		if err != nil {
			return execution.State{}, false, wrap("submit execution", err)
		}
		return state, true, nil
	}
	if err != nil {
		return execution.State{}, false, wrap("submit execution", err)
	}
	h.cache.put(stream, loaded[execution.State]{state: state, revision: res.Revision, exists: true})
	return state, true, nil
}

// appendClaimedSubmit appends the submit of a fresh execution in one commit that takes claim
// (ErrReplayed when another request holds it, and nothing is written), and returns the state
// as submitted.
func appendClaimedSubmit(ctx context.Context, h *Executions, sub execution.Submit, claim *RequestClaim) (execution.State, error) {
	events, err := execution.DecideSubmit(execution.State{}, sub, h.now())
	if err != nil {
		return execution.State{}, wrap("submit execution", err)
	}
	var st execution.State
	for _, e := range events {
		st = st.Evolve(e)
	}
	if err := appendNewExecution(ctx, h, sub.ExecutionID, events, st, claim); err != nil {
		return execution.State{}, err
	}
	return st, nil
}

// appendLeasedSubmit appends the submit of a worker module's call together with the lease of
// its first attempt to the worker of hand, a poll waiting in this process, in one commit that
// takes claim (the request's signature: ErrReplayed when another request holds it, and nothing
// is written), and returns the state as submitted (the answer of a call that does not wait)
// and as leased.
func appendLeasedSubmit(ctx context.Context, h *Executions, sub execution.Submit, hand PollHandoff, claim *RequestClaim) (submitted, leased execution.State, err error) {
	now := h.now()
	events, err := execution.DecideSubmit(execution.State{}, sub, now)
	if err != nil {
		return submitted, leased, wrap("submit execution", err)
	}
	for _, e := range events {
		submitted = submitted.Evolve(e)
	}
	lease, err := execution.DecideLease(submitted, hand.Worker(), hand.Lease(), now)
	if err != nil {
		return submitted, leased, wrap("lease submitted task", err)
	}
	leased = submitted
	for _, e := range lease {
		leased = leased.Evolve(e)
	}
	if err := appendNewExecution(ctx, h, sub.ExecutionID, append(events, lease...), leased, claim); err != nil {
		return execution.State{}, execution.State{}, err
	}
	return submitted, leased, nil
}

// prepareSubmit checks a submit and turns it into the domain's command: the module's id (with
// its price, and a workspace module's transport and deadline) and the sealed callback. It is
// where a submit's values are checked (the API only parses their JSON types), before anything
// is appended; its one read is the workspace's module, when the call names one. Errors are
// validation errors naming the field.
func (h *Executions) prepareSubmit(ctx context.Context, c SubmitExecution) (execution.Submit, moduleUse, error) {
	if err := execution.CheckAttempts(c.Attempts); err != nil {
		return execution.Submit{}, moduleUse{}, err
	}
	if err := domain.CheckStorableString("module", c.Module); err != nil {
		return execution.Submit{}, moduleUse{}, err
	}
	if err := domain.CheckStorableJSON("input", c.Input); err != nil {
		return execution.Submit{}, moduleUse{}, err
	}
	if err := domain.CheckStorableJSON("config", c.Config); err != nil {
		return execution.Submit{}, moduleUse{}, err
	}
	use, err := h.catalog.use(ctx, c.WorkspaceID, c.Module)
	if err != nil {
		return execution.Submit{}, use, err
	}
	if err := use.validate(c.Config, c.Input); err != nil {
		return execution.Submit{}, use, err
	}
	if err := checkCallback(c.Callback); err != nil {
		return execution.Submit{}, use, err
	}
	cb, err := h.sealCallback(c.Callback)
	if err != nil {
		return execution.Submit{}, use, err
	}
	return execution.Submit{WorkspaceID: c.WorkspaceID, APIKeyID: c.APIKeyID, Module: c.Module, Input: c.Input,
		Config: c.Config, Attempts: c.Attempts, CostMilli: use.costMilli, Callback: cb,
		TimeoutMs: use.timeoutMs, Transport: use.transport}, use, nil
}

// checkCallback checks the callback fields: an absolute https URL without credentials, and
// headers the delivery does not set itself.
func checkCallback(cb CallbackRequest) error {
	if cb.URL == "" {
		if cb.Secret != "" || len(cb.Headers) > 0 {
			return domain.Invalid("callbackUrl", "is required with callbackSecret or callbackHeaders")
		}
		return nil
	}
	if err := checkCallbackURL(cb.URL); err != nil {
		return err
	}
	if err := domain.CheckStorableString("callbackSecret", cb.Secret); err != nil {
		return err
	}
	if len(cb.Secret) > MaxCallbackSecret {
		return domain.Invalid("callbackSecret", "must be at most %d characters", MaxCallbackSecret)
	}
	return checkCallbackHeaders(cb.Headers)
}

func checkCallbackURL(raw string) error {
	if err := domain.CheckStorableString("callbackUrl", raw); err != nil {
		return err
	}
	if len(raw) > MaxCallbackURL {
		return domain.Invalid("callbackUrl", "must be at most %d characters", MaxCallbackURL)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "" {
		return domain.Invalid("callbackUrl", "must be an absolute https URL")
	}
	if u.Scheme != "https" {
		return domain.Invalid("callbackUrl", "must use https")
	}
	if u.User != nil {
		return domain.Invalid("callbackUrl", "must not carry credentials; use callbackHeaders")
	}
	return nil
}

// reservedCallbackHeaders are set by the delivery itself (SPEC.md 6.1) and cannot be overridden.
var reservedCallbackHeaders = map[string]bool{"content-type": true, "content-length": true, "host": true,
	"user-agent": true, "x-delivery-id": true, "x-event": true, "x-signature": true, "x-signature-version": true,
	"x-signature-timestamp": true, "transfer-encoding": true, "connection": true}

func checkCallbackHeaders(h map[string]string) error {
	if len(h) > MaxCallbackHeaders {
		return domain.Invalid("callbackHeaders", "must have at most %d headers", MaxCallbackHeaders)
	}
	for name, value := range h {
		if err := domain.CheckStorableString("callbackHeaders", name); err != nil {
			return err
		}
		field := "callbackHeaders." + name
		if !validHeaderName(name) {
			return domain.Invalid(field, "is not a valid header name")
		}
		if reservedCallbackHeaders[strings.ToLower(name)] {
			return domain.Invalid(field, "is set by the delivery and cannot be overridden")
		}
		if err := domain.CheckStorableString(field, value); err != nil {
			return err
		}
		if len(value) > MaxHeaderValue || strings.ContainsAny(value, "\r\n\x00") {
			return domain.Invalid(field, "must be a single-line value of at most %d characters", MaxHeaderValue)
		}
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 127 || !(c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~' ||
			(c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}

// sealCallback seals the secret and header values: they enter the event log only encrypted,
// bound to the field they belong to.
func (h *Executions) sealCallback(req CallbackRequest) (execution.Callback, error) {
	cb := execution.Callback{URL: req.URL}
	if req.Secret == "" && len(req.Headers) == 0 {
		return cb, nil
	}
	if h.sealer == nil {
		return cb, errors.New("submit execution: no sealer configured for callback secrets")
	}
	if req.Secret != "" {
		sealed, err := h.sealer.Seal([]byte(req.Secret), []byte("callbackSecret"))
		if err != nil {
			return cb, err
		}
		cb.SealedSecret = sealed
	}
	if len(req.Headers) > 0 {
		plain, err := json.Marshal(req.Headers)
		if err != nil {
			return cb, err
		}
		if cb.SealedHeaders, err = h.sealer.Seal(plain, []byte("callbackHeaders")); err != nil {
			return cb, err
		}
		for name := range req.Headers {
			cb.HeaderNames = append(cb.HeaderNames, name)
		}
		sort.Strings(cb.HeaderNames)
	}
	return cb, nil
}

// cacheWindow finds, without I/O, the call's cache window: its stream ("" when windows are
// off), the window as this process last knew it (read false: not read, a guess), and the
// execution whose output the call reuses ("" when the call is not free). A window known open is
// open: none is opened over an open one. A window not known, or known closed, is only a guess
// that the append opening it checks (its expected revision), so a call opening a window reads
// nothing first (docs/architecture.md, "Uniqueness").
func (h *Executions) cacheWindow(c SubmitExecution) (string, loaded[execution.CacheWindow], string, error) {
	var w loaded[execution.CacheWindow]
	if c.CacheWindow <= 0 {
		return "", w, "", nil
	}
	key, err := CacheKey(c.WorkspaceID, c.Module, c.Input, c.Config)
	if err != nil {
		return "", w, "", err
	}
	stream := eventstore.StreamName(execution.CacheCategory, key)
	w, _, _ = cachedState(h, stream, cacheWindowAgg)
	leader, _ := w.state.Leader(h.now())
	return stream, w, leader, nil
}

// readCacheWindow reads the window's stream: what cacheWindow guessed is then known.
func (h *Executions) readCacheWindow(ctx context.Context, stream string) (loaded[execution.CacheWindow], string, error) {
	w, err := load(ctx, h, stream, cacheWindowAgg)
	if err != nil {
		return w, "", err
	}
	leader, _ := w.state.Leader(h.now())
	return w, leader, nil
}

// openCacheWindow opens the window led by id, or returns the leader of a window opened before
// it. It decides first on read, the window as cacheWindow found it (nil: read it first); a
// window that moved meanwhile is read again and decided anew. A window id leads already (its
// run-first commit opened it) is answered "".
func (h *Executions) openCacheWindow(ctx context.Context, stream string, read *loaded[execution.CacheWindow], id string, window time.Duration) (string, error) {
	leader := ""
	_, _, err := executeFrom(ctx, h, stream, cacheWindowAgg, read, func(w execution.CacheWindow) ([]domain.Event, error) {
		leader, _ = w.Leader(h.now())
		return execution.DecideOpenWindow(w, stream, id, window, h.now()), nil
	})
	if err != nil {
		return "", wrap("cache window", err)
	}
	if leader == id {
		return "", nil
	}
	return leader, nil
}

// WindowOpening is the opening of a call's cache window with the call as its leader, written
// in the commit that creates the call (ChargedFinish.Window) and expecting the window's stream
// where the submit found it: should another call have opened the window meanwhile, that part
// fails on revision, the call is left out of the commit, and its submit finds the leader.
type WindowOpening struct {
	stream string
	read   loaded[execution.CacheWindow]
	events []domain.Event
}

// windowOpening is the opening of the window at stream as read, led by id; nil when a window is
// open there already.
func (h *Executions) windowOpening(stream string, read loaded[execution.CacheWindow], id string, window time.Duration) *WindowOpening {
	events := execution.DecideOpenWindow(read.state, stream, id, window, h.now())
	if len(events) == 0 {
		return nil
	}
	return &WindowOpening{stream: stream, read: read, events: events}
}

// part is the opening's append, and the window after it at the revision before it.
func (w *WindowOpening) part(ctx context.Context) (eventstore.StreamAppend, loaded[execution.CacheWindow], error) {
	data, err := encodeEvents(ctx, w.events)
	if err != nil {
		return eventstore.StreamAppend{}, w.read, err
	}
	after := w.read
	for _, e := range w.events {
		after.state = after.state.Evolve(e)
	}
	return eventstore.StreamAppend{Stream: w.stream, Expected: w.read.expected(), Events: data}, after, nil
}

func idempotencyStream(c SubmitExecution) string {
	sum := sha256.Sum256([]byte(c.WorkspaceID + "\n" + c.IdempotencyKey))
	return eventstore.StreamName(execution.IdempotencyCategory, hex.EncodeToString(sum[:]))
}

// boundExecution reads, without appending, the execution an earlier submit bound the key to
// ("" when none); a key bound to another body is ErrIdempotencyKeyReused.
func (h *Executions) boundExecution(ctx context.Context, c SubmitExecution, id string) (string, error) {
	r, err := load(ctx, h, idempotencyStream(c), idempotencyAgg)
	if err != nil {
		return "", err
	}
	bound, _, err := execution.DecideIdempotencyKey(r.state, c.WorkspaceID, c.BodyHash, id, h.now())
	if err != nil || bound == id {
		return "", err
	}
	return bound, nil
}

// bindIdempotencyKey binds the key to id, or returns the execution a concurrent submit bound
// it to first.
func (h *Executions) bindIdempotencyKey(ctx context.Context, c SubmitExecution, id string) (string, error) {
	bound := ""
	_, err := execute(ctx, h, idempotencyStream(c), idempotencyAgg, func(r execution.IdempotencyRecord) ([]domain.Event, error) {
		var events []domain.Event
		var err error
		bound, events, err = execution.DecideIdempotencyKey(r, c.WorkspaceID, c.BodyHash, id, h.now())
		return events, err
	})
	if err != nil {
		return "", fmt.Errorf("idempotency key: %w", err)
	}
	return bound, nil
}
