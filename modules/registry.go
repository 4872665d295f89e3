package modules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
)

// Registry is a set of modules by name. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	modules map[string]Module
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{modules: make(map[string]Module)}
}

// Register adds m. A second module with the same name is rejected.
func (r *Registry) Register(m Module) error {
	if m == nil {
		return errors.New("modules: nil module")
	}
	name := m.Name()
	if !nameRE.MatchString(name) {
		return fmt.Errorf("modules: invalid module name %q", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.modules[name]; dup {
		return fmt.Errorf("modules: module %q is already registered", name)
	}
	r.modules[name] = m
	return nil
}

// Get returns the module called name.
func (r *Registry) Get(name string) (Module, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.modules[name]
	return m, ok
}

// List returns every module's Info, sorted by name.
func (r *Registry) List() []Info {
	r.mu.RLock()
	out := make([]Info, 0, len(r.modules))
	for _, m := range r.modules {
		out = append(out, InfoOf(m))
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Validate checks a submit: the module must exist (otherwise a
// *ValidationError on field "module" that also matches ErrUnknownModule) and
// config and input must pass the module's Validate.
func (r *Registry) Validate(name string, config, input json.RawMessage) error {
	m, ok := r.Get(name)
	if !ok {
		return UnknownModule(name)
	}
	return m.Validate(config, input)
}

// ValidateConfig checks a workflow component's module and config: the module
// must exist (a *ValidationError on field "module" matching ErrUnknownModule)
// and config must pass the module's ValidateConfig.
func (r *Registry) ValidateConfig(name string, config json.RawMessage) error {
	m, ok := r.Get(name)
	if !ok {
		return UnknownModule(name)
	}
	return m.ValidateConfig(config)
}

// UnknownModule is the error of a submit or a workflow component naming a module that does not
// exist: a *ValidationError on field "module" matching ErrUnknownModule.
func UnknownModule(name string) *ValidationError {
	return &ValidationError{Field: "module", Message: fmt.Sprintf("unknown module %q", name), cause: ErrUnknownModule}
}

// Run runs module name on call, under a deadline of the module's Timeout (or
// ctx's own deadline, if earlier). It returns either the output (compact,
// valid JSON; "null" if the module produced nothing) or an error that is
// exactly one of:
//
//   - a *Failure: the call failed and that is its result (record it as the
//     execution's error; it may be retried if attempts remain). This covers
//     invalid config/input (code "invalid_request"), an exceeded deadline,
//     whether the module's or ctx's (code "timeout"), a recovered panic
//     (code "panic"), output that is not JSON ("invalid_output"), the
//     module's own failures, and plain errors a module returned
//     ("module_error").
//   - an infrastructure error: name is unknown (errors.Is ErrUnknownModule),
//     ctx was cancelled (errors.Is context.Canceled: the run was abandoned,
//     e.g. at shutdown, and should be left for another attempt), or the
//     module returned an error marked with Infrastructure (errors.Is
//     ErrInfrastructure).
func (r *Registry) Run(ctx context.Context, name string, call Call) (json.RawMessage, error) {
	return r.run(ctx, name, call, true)
}

// RunValidated is Run for a call whose config and input this registry validated (Validate)
// moments ago, as a submit run at once in the process that accepted it: validating again would
// only parse both documents a second time. Calls read back from the log go through Run, since
// the schema may have changed since their submit.
func (r *Registry) RunValidated(ctx context.Context, name string, call Call) (json.RawMessage, error) {
	return r.run(ctx, name, call, false)
}

func (r *Registry) run(ctx context.Context, name string, call Call, validate bool) (json.RawMessage, error) {
	m, ok := r.Get(name)
	if !ok {
		return nil, fmt.Errorf("modules: %w %q", ErrUnknownModule, name)
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("modules: run of %s abandoned: %w", name, err)
	}
	if validate {
		if err := m.Validate(call.Config, call.Input); err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, &Failure{Code: CodeInvalidRequest, Message: ve.Error(), Details: map[string]string{"field": ve.Field}}
			}
			return nil, classify(ctx, ctx, name, m, err)
		}
	}
	if call.Attempt < 1 {
		call.Attempt = 1
	}
	runCtx, cancel := context.WithTimeout(ctx, m.Timeout())
	defer cancel()
	out, err := safeRun(runCtx, m, call)
	if err != nil {
		return nil, classify(ctx, runCtx, name, m, err)
	}
	if len(out) == 0 {
		return json.RawMessage("null"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, out); err != nil {
		return nil, Fail(CodeInvalidOutput, "module %s produced output that is not valid JSON", name)
	}
	return buf.Bytes(), nil
}

func safeRun(ctx context.Context, m Module, call Call) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, panicFailure(m.Name(), p)
		}
	}()
	return m.Run(ctx, call)
}

func panicFailure(name string, p any) *Failure {
	return &Failure{
		Code:    CodePanic,
		Message: fmt.Sprintf("module %s crashed: internal error", name),
		Details: map[string]string{"panic": fmt.Sprint(p)},
		Stack:   string(debug.Stack()),
	}
}

// classify maps a Run error to a *Failure or an infrastructure error; see
// Registry.Run.
func classify(parent, runCtx context.Context, name string, m Module, err error) error {
	if perr := parent.Err(); perr != nil && !errors.Is(perr, context.DeadlineExceeded) {
		return fmt.Errorf("modules: run of %s abandoned: %w", name, perr)
	}
	if f, ok := AsFailure(err); ok {
		return f
	}
	if errors.Is(err, ErrInfrastructure) {
		return err
	}
	if errors.Is(runCtx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		if parent.Err() == nil {
			return Fail(CodeTimeout, "module %s timed out after %s", name, m.Timeout())
		}
		return Fail(CodeTimeout, "module %s did not finish before the execution deadline", name)
	}
	return &Failure{Code: CodeModuleError, Message: err.Error()}
}

// evaluating counts the evaluations started by runIsolated that have not
// returned yet, abandoned ones included.
var evaluating atomic.Int64

// evaluationsRunning reports how many isolated evaluations are still running.
func evaluationsRunning() int64 { return evaluating.Load() }

// runIsolated runs f in its own goroutine so that the caller is answered at
// its deadline even while f finishes its current step. On ctx's end it
// returns ctx.Err() at once; f must itself stop soon after (text/template and
// expr do through the checks addDeadlineChecks and deadlineChecks put in
// their programs). Panics in f are recovered into a Failure.
func runIsolated(ctx context.Context, name string, f func() (json.RawMessage, error)) (json.RawMessage, error) {
	type result struct {
		out json.RawMessage
		err error
	}
	ch := make(chan result, 1)
	evaluating.Add(1)
	go func() {
		defer evaluating.Add(-1)
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: panicFailure(name, p)}
			}
		}()
		out, err := f()
		ch <- result{out, err}
	}()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
