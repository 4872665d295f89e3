package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

// codeOutputUnstorable fails an attempt whose output, or whose failure's details, the event
// store cannot hold (docs/executions.md): retried while attempts remain, then FAILED, never
// charged. Recording it as it came would fail its append on every try, forever.
const codeOutputUnstorable = "output_unstorable"

// runModule runs the call of st's attempt and holds what it answers to what the store can keep
// (domain.CheckStorableJSON, the check inputs pass): an output it cannot becomes an
// output_unstorable failure, and so does a failure whose details it cannot. validated: the
// submit validated the call in this process a moment ago (modules.Registry.RunValidated).
func (e *Executor) runModule(ctx context.Context, st execution.State, attempt int, validated bool) (json.RawMessage, error) {
	call := modules.Call{Config: st.Config, Input: st.Input, Attempt: attempt, ExecutionID: st.ID}
	run := e.registry.Run
	if validated {
		run = e.registry.RunValidated
	}
	attemptCtx, cancel := attemptDeadline(ctx, st)
	defer cancel()
	if st.Transport != nil { // a workspace module: the user's code, over its transport
		return e.runTransport(attemptCtx, st, attempt)
	}
	if _, ok := e.registry.Get(st.Module); !ok {
		return nil, unknownModule(st) // transport_http.go
	}
	out, err := run(attemptCtx, st.Module, call)
	if err != nil {
		if f, ok := modules.AsFailure(err); ok {
			return nil, storableFailure(stageTimeout(f, st, attemptCtx, ctx))
		}
		return nil, err
	}
	if err := domain.CheckStorableJSON("output", out); err != nil {
		return nil, outputUnstorable("output", err)
	}
	return out, nil
}

// attemptDeadline bounds the attempt by the stage's timeoutMs (components[].timeoutMs), below
// the module's own deadline, which the registry applies. A process that dies mid-attempt
// leaves it to the lease, which covers the module's deadline and so this one.
func attemptDeadline(ctx context.Context, st execution.State) (context.Context, context.CancelFunc) {
	if st.TimeoutMs <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(st.TimeoutMs)*time.Millisecond)
}

// stageTimeout names the stage's timeoutMs in a timeout failure that it, not the module's
// own deadline, caused: the attempt's context ran out while the one outside it (parent) did not.
func stageTimeout(f *modules.Failure, st execution.State, attempt, parent context.Context) *modules.Failure {
	if f.Code != modules.CodeTimeout || st.TimeoutMs <= 0 || parent.Err() != nil || attempt.Err() == nil {
		return f
	}
	return modules.Fail(modules.CodeTimeout, "the attempt did not finish within the stage's timeoutMs (%d ms)", st.TimeoutMs)
}

// storableFailure is f, or an output_unstorable failure when f's details cannot be stored.
func storableFailure(f *modules.Failure) *modules.Failure {
	body, err := json.Marshal(f)
	if err == nil {
		err = domain.CheckStorableJSON("error", body)
	}
	if err != nil {
		return outputUnstorable("error details", err)
	}
	return f
}

// outputUnstorable is the failure of an attempt whose what (its output, its error details) the
// store cannot hold, saying why in the check's words: no part of the document itself (neither
// its text nor where in it the problem is), which may hold what the caller's APIs answered.
func outputUnstorable(what string, err error) *modules.Failure {
	why := "it holds text or a number PostgreSQL cannot store"
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		why = "it " + ve.Message
	}
	return &modules.Failure{Code: codeOutputUnstorable,
		Message: fmt.Sprintf("the module's %s cannot be stored: %s", what, why)}
}

// unstorable reports a store's refusal of an outcome's events, which no retry of the same
// outcome changes.
func unstorable(err error) bool { return errors.Is(err, eventstore.ErrUnstorable) }
