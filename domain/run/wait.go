package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Durable waits (docs/workflows.md "Waits, signals and approvals"). A WAIT stage is dispatched
// like any control stage, then StageWaiting makes it RUNNING with what it waits for; it ends
// with StageCompleted (or StageFailed on a timeout with onTimeout "fail") whose Wait field says
// what ended it. Its due time is in the event, so the scheduler finds it again after a crash,
// and any step at or after it ends the wait: firing twice records it once.

// ErrEvaluationTimedOut is what an Until returns when the evaluation ran out of time (a busy
// process), not because of the expression: the stage is left to wait for the next step instead
// of failing.
var ErrEvaluationTimedOut = errors.New("the evaluation ran out of time")

// Until evaluates a WAIT's until expression over the stage's input (the caller does it, as it
// evaluates conditions: Condition says why).
type Until func(src string, input json.RawMessage) (time.Time, error)

// WaitingFor is what a waiting stage waits for, as the stage record shows it.
type WaitingFor struct {
	// Kind is "for", "until", "signal" or "approval".
	Kind string `json:"kind"`
	// Until is when a time wait ends, or when a signal or approval wait times out; null for
	// one without a timeout.
	Until *time.Time `json:"until"`
	// Signal is the name a signal wait waits for.
	Signal string `json:"signal,omitempty"`
	// OnTimeout is what a signal or approval wait does at Until ("fail" or "continue").
	OnTimeout string `json:"onTimeout,omitempty"`
	// Question is what an approval asks.
	Question string `json:"question,omitempty"`
	// ApprovalURL is the approval's single-use signed URL; never in the log: commands derives
	// it when it shows the stage (Workflows.RunDetail).
	ApprovalURL string `json:"approvalUrl,omitempty"`
}

// The ways a wait ends (StageCompleted.Wait, StageFailed.Wait).
const (
	WaitEndedTime     = "time"
	WaitEndedSignal   = "signal"
	WaitEndedApproval = "approval"
	WaitEndedTimeout  = "timeout"
)

// CodeWaitTimeout is the error code of a signal or approval wait that timed out with
// onTimeout "fail"; CodeWaitUntil that of an until expression that gave no time.
const (
	CodeWaitTimeout = "wait_timeout"
	CodeWaitUntil   = "wait_until"
)

// StageWaiting records that a WAIT stage started waiting: it is RUNNING until its time, its
// signal or its approval.
type StageWaiting struct {
	RunID      string     `json:"runId"`
	StageID    string     `json:"stageId"`
	WaitingFor WaitingFor `json:"waitingFor"`
	At         time.Time  `json:"at"`
}

// EventType names the event in the log.
func (StageWaiting) EventType() string { return "RunStageWaiting" }

// MaxSignals bounds the signals a run keeps for stages that do not wait for them yet.
const MaxSignals = 100

// MaxSignalID bounds a signal's id.
const MaxSignalID = 200

// Signal is a named message to a run (POST .../executions/{runId}/signals).
type Signal struct {
	Name    string          `json:"name"`
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// SignalReceived records a signal sent to a run. The stages waiting for its name complete in
// the same append (StageCompleted.SignalID); when none does, the run keeps it until one does.
type SignalReceived struct {
	RunID string `json:"runId"`
	Signal
	At time.Time `json:"at"`
}

// EventType names the event in the log.
func (SignalReceived) EventType() string { return "RunSignalReceived" }

func init() {
	domain.Events.Register(StageWaiting{}, SignalReceived{})
}

// openWaits counts the WAIT stages still open: a failing run abandons them instead of waiting.
func (s *State) openWaits() int {
	n := 0
	for id := range s.waits {
		if st, _ := s.Stage(id); !st.Status.Terminal() {
			n++
		}
	}
	return n
}

// openWaitIDs lists the open WAIT stages in the order they were dispatched.
func (s *State) openWaitIDs() []string {
	ids := make([]string, 0, len(s.waits))
	for id := range s.waits {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return s.byID[a] - s.byID[b] })
	return ids
}

// NextWait is the earliest time an open wait of the run is due; zero when none is.
func (s *State) NextWait() time.Time {
	var next time.Time
	for id := range s.waits {
		st, _ := s.Stage(id)
		if st.Status.Terminal() || st.Waiting == nil || st.Waiting.Until == nil {
			continue
		}
		if next.IsZero() || st.Waiting.Until.Before(next) {
			next = *st.Waiting.Until
		}
	}
	return next
}

// settleWaits starts the WAIT stages just dispatched and ends those whose time came or whose
// signal is kept on the run.
func (s *State) settleWaits(now time.Time, ev Eval) domain.Event {
	for _, id := range s.openWaitIDs() {
		st, _ := s.Stage(id)
		if st.Status.Terminal() {
			continue
		}
		if st.Waiting == nil {
			if e := s.beginWait(st, now, ev); e != nil {
				return e
			}
			continue // its until could not be evaluated in time: the next step tries again
		}
		w := st.Waiting
		if w.Kind == workflow.WaitSignal {
			if i := s.keptSignal(w.Signal); i >= 0 {
				sig := s.Signals[i]
				return s.waitCompleted(st, sig.Payload, WaitEndedSignal, sig.ID, now, ev)
			}
		}
		if w.Until != nil && !now.Before(*w.Until) {
			return s.waitDue(st, now, ev)
		}
	}
	return nil
}

func (s *State) beginWait(st Stage, now time.Time, ev Eval) domain.Event {
	comp := s.Component(st)
	cfg, err := workflow.ParseWait(comp.Config)
	if err != nil { // validated when saved: only a definition from before a change of the rules
		return StageFailed{RunID: s.ID, StageID: st.ID, Error: failure(CodeWaitUntil, err.Error(), st.ID), At: now}
	}
	w := WaitingFor{Kind: cfg.Kind()}
	var until time.Time
	switch w.Kind {
	case workflow.WaitFor:
		until = now.Add(cfg.Duration())
	case workflow.WaitUntil:
		if ev.Until == nil {
			return StageFailed{RunID: s.ID, StageID: st.ID, At: now,
				Error: failure(CodeWaitUntil, "the until expression cannot be evaluated here", st.ID)}
		}
		t, err := ev.Until(cfg.Until, s.StageInput(st))
		if errors.Is(err, ErrEvaluationTimedOut) {
			return nil
		}
		if err != nil {
			return StageFailed{RunID: s.ID, StageID: st.ID, At: now,
				Error: failure(CodeWaitUntil, fmt.Sprintf("the until expression gave no RFC 3339 time: %s", err), st.ID)}
		}
		until = t.UTC()
	default:
		timeout, on := cfg.Timeout()
		if timeout > 0 {
			until = now.Add(timeout)
		}
		w.OnTimeout = on
		if cfg.Signal != nil {
			w.Signal = cfg.Signal.Name
		} else {
			w.Question = cfg.Approval.Question
			if w.Question == "" {
				w.Question = cmp(comp.Name, comp.ID)
			}
		}
	}
	if !until.IsZero() {
		w.Until = &until
	}
	return StageWaiting{RunID: s.ID, StageID: st.ID, WaitingFor: w, At: now}
}

func cmp(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// waitDue ends a wait whose time came: a time wait completes with its input passed through; a
// signal or approval wait times out.
func (s *State) waitDue(st Stage, now time.Time, ev Eval) domain.Event {
	w := st.Waiting
	switch {
	case w.Kind == workflow.WaitFor || w.Kind == workflow.WaitUntil:
		return s.waitCompleted(st, s.StageInput(st), WaitEndedTime, "", now, ev)
	case w.OnTimeout == workflow.OnTimeoutContinue && w.Kind == workflow.WaitApproval:
		return s.waitCompleted(st, json.RawMessage(`{"approved":false,"by":null,"comment":null,"timedOut":true}`), WaitEndedTimeout, "", now, ev)
	case w.OnTimeout == workflow.OnTimeoutContinue:
		return s.waitCompleted(st, json.RawMessage(`{"timedOut":true}`), WaitEndedTimeout, "", now, ev)
	}
	msg := fmt.Sprintf("no signal %q came before the wait's timeout", w.Signal)
	if w.Kind == workflow.WaitApproval {
		msg = "no one decided the approval before its timeout"
	}
	return StageFailed{RunID: s.ID, StageID: st.ID, Error: failure(CodeWaitTimeout, msg, st.ID), Wait: WaitEndedTimeout, At: now}
}

func (s *State) waitCompleted(st Stage, out json.RawMessage, how, signalID string, now time.Time, ev Eval) StageCompleted {
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return StageCompleted{RunID: s.ID, StageID: st.ID, Output: out, Wait: how, SignalID: signalID,
		Conditions: conditions(s.graph.Out[st.ComponentID], out, s.Input, ev.When), At: now}
}

// keptSignal is the index of the first signal named name the run keeps, or -1.
func (s *State) keptSignal(name string) int {
	return slices.IndexFunc(s.Signals, func(g Signal) bool { return g.Name == name })
}

// DecideSignal records a signal: the stages waiting for its name complete with its payload,
// and the run advances; when none waits, the run keeps it (up to MaxSignals) for the first
// stage that will. A signal whose id the run has seen is a duplicate: no events, no error.
func DecideSignal(s State, sig Signal, ev Eval, now time.Time) ([]domain.Event, []Stage, error) {
	if !s.Exists {
		return nil, nil, domain.ErrNotFound
	}
	switch {
	case strings.TrimSpace(sig.Name) == "" || len(sig.Name) > workflow.MaxSignalName:
		return nil, nil, domain.Invalid("name", "is required: 1 to %d characters", workflow.MaxSignalName)
	case strings.TrimSpace(sig.ID) == "" || len(sig.ID) > MaxSignalID:
		return nil, nil, domain.Invalid("id", "must be 1 to %d characters", MaxSignalID)
	}
	if s.signalIDs[sig.ID] {
		return nil, nil, nil
	}
	if s.Status.Terminal() {
		return nil, nil, domain.Conflict("run %s has already finished (%s): it takes no more signals", s.ID, s.Status)
	}
	if len(sig.Payload) == 0 {
		sig.Payload = json.RawMessage("null")
	}
	c := s.Clone()
	now = now.UTC()
	events := []domain.Event{SignalReceived{RunID: s.ID, Signal: sig, At: now}}
	waiting := 0
	for _, id := range c.openWaitIDs() {
		st, _ := c.Stage(id)
		if st.Status.Terminal() || st.Waiting == nil || st.Waiting.Kind != workflow.WaitSignal || st.Waiting.Signal != sig.Name {
			continue
		}
		waiting++
		events = append(events, c.waitCompleted(st, sig.Payload, WaitEndedSignal, sig.ID, now, ev))
	}
	if waiting == 0 && len(s.Signals) >= MaxSignals {
		return nil, nil, domain.Conflict("run %s already keeps %d signals no stage has waited for yet", s.ID, MaxSignals)
	}
	for _, e := range events {
		c.Apply(e)
	}
	events, dispatched := c.proceed(events, ev, now)
	return events, dispatched, nil
}

// Approval is a person's decision on an approval wait.
type Approval struct {
	Approved bool
	// By names who decided: a member's e-mail from the console, or what the approval page's
	// form said (free text: the URL's holder is not authenticated).
	By      string
	Comment string
}

// MaxApprovalText bounds an approval's by and comment.
const MaxApprovalText = 2000

// DecideApproval completes an approval stage with {"approved", "by", "comment"} and advances
// the run. An approval decides once: a decided (or timed out) stage is a conflict.
func DecideApproval(s State, stageID string, a Approval, ev Eval, now time.Time) ([]domain.Event, []Stage, error) {
	st, ok := s.Stage(stageID)
	if !s.Exists || !ok || st.Module != workflow.ModuleWait {
		return nil, nil, domain.ErrNotFound
	}
	if len(a.By) > MaxApprovalText {
		return nil, nil, domain.Invalid("by", "must be at most %d characters", MaxApprovalText)
	}
	if len(a.Comment) > MaxApprovalText {
		return nil, nil, domain.Invalid("comment", "must be at most %d characters", MaxApprovalText)
	}
	if err := domain.CheckStorableString("comment", a.Comment); err != nil {
		return nil, nil, err
	}
	if err := domain.CheckStorableString("by", a.By); err != nil {
		return nil, nil, err
	}
	if st.Status.Terminal() || s.Status.Terminal() {
		return nil, nil, domain.Conflict("the approval of stage %s has already been decided (or it timed out)", st.ID)
	}
	if st.Waiting == nil || st.Waiting.Kind != workflow.WaitApproval {
		return nil, nil, domain.Conflict("stage %s does not wait for an approval", st.ID)
	}
	out, _ := json.Marshal(map[string]any{"approved": a.Approved, "by": nullIfEmpty(a.By), "comment": nullIfEmpty(a.Comment)})
	c := s.Clone()
	e := c.waitCompleted(st, out, WaitEndedApproval, "", now.UTC(), ev)
	c.Apply(e)
	events, dispatched := c.proceed([]domain.Event{e}, ev, now)
	return events, dispatched, nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
