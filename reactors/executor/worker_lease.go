package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/modules"
)

// TaskPoll is a worker's long-poll (POST /v1/sdk/tasks/poll), checked by the caller.
type TaskPoll struct {
	WorkspaceID string
	// AllowedWorkflowIDs, when not empty, limits the poll to tasks of runs of those workflows
	// (a scoped key).
	AllowedWorkflowIDs []string
	Modules            []string
	Max                int
	Wait               time.Duration
	WorkerID           string
}

// LeasedTask is an attempt leased to a worker: the task as the HTTP transport posts it, and
// when its lease runs out unless renewed.
type LeasedTask struct {
	Task
	LeaseExpiresAt time.Time `json:"leaseExpiresAt"`
}

// taskPoll is a poll waiting on the board.
type taskPoll struct {
	modules map[string]bool
	wake    chan struct{}
	// fire, when set, is called instead of a send on wake (WaitTasks); it must not block.
	fire func()
	// async is the WaitTasks poll, which a submit may hand its task to (ReservePoll).
	async *asyncPoll
}

// wake tells the polls that wait for t's module that it may be leased; b.mu is held.
func (b *taskBoard) wake(t *boardTask) {
	for p := range b.polls[t.workspace] {
		if !p.modules[t.module] {
			continue
		}
		if p.fire != nil {
			p.fire()
			continue
		}
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// register puts a waiting poll on the board; the function returned takes it off.
func (b *taskBoard) register(workspaceID string, p *taskPoll) func() {
	b.mu.Lock()
	set := b.polls[workspaceID]
	if set == nil {
		set = map[*taskPoll]struct{}{}
		b.polls[workspaceID] = set
	}
	set[p] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.polls[workspaceID], p)
		if len(b.polls[workspaceID]) == 0 {
			delete(b.polls, workspaceID)
		}
		b.mu.Unlock()
	}
}

// WaitTasks is PollTasks for a caller that keeps no goroutine waiting: answer is called once,
// from a goroutine of the board's, with the tasks leased, or with none once p.Wait passes, ctx
// ends or the executor stops. A waiting poll is then a board entry and a timer; a goroutine
// runs only while it leases.
func (e *Executor) WaitTasks(ctx context.Context, p TaskPoll, answer func([]LeasedTask, error)) {
	e.sawWorker(p, 0)
	w := &asyncPoll{e: e, ctx: ctx, p: p, answer: answer}
	tp := &taskPoll{modules: map[string]bool{}, fire: w.fire, async: w}
	for _, m := range p.Modules {
		tp.modules[m] = true
	}
	// Everything cleanUp needs is set before the poll can be woken or expired.
	e.mu.Lock()
	runCtx := e.ctx
	e.mu.Unlock()
	w.mu.Lock()
	w.unregister = e.tasks.register(p.WorkspaceID, tp)
	w.timer = time.AfterFunc(p.Wait, w.expire)
	w.stopCtx = context.AfterFunc(ctx, w.expire)
	if runCtx != nil {
		w.stopRun = context.AfterFunc(runCtx, w.expire)
	}
	w.mu.Unlock()
	if e.tasks.hasPending(p) {
		w.fire() // a task that came between the caller's first look and the registration
	}
}

// hasPending reports whether the board has tasks of p's modules queued: a poll that registers
// after them was not woken by them. One that comes after the registration wakes it.
func (b *taskBoard) hasPending(p TaskPoll) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range p.Modules {
		if len(b.pending[wsModule{p.WorkspaceID, m}]) > 0 {
			return true
		}
	}
	return false
}

// asyncPoll is a WaitTasks under way.
type asyncPoll struct {
	e      *Executor
	ctx    context.Context
	p      TaskPoll
	answer func([]LeasedTask, error)

	mu                        sync.Mutex
	running, again, done, end bool
	unregister                func()
	timer                     *time.Timer
	stopCtx, stopRun          func() bool
}

// fire leases in a goroutine of its own, once at a time; a wake-up meanwhile runs it again.
func (w *asyncPoll) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if w.running {
		w.again = true
		return
	}
	w.running = true
	go w.lease()
}

func (w *asyncPoll) lease() {
	for {
		tasks, err := w.e.leaseTasks(w.ctx, w.p)
		w.mu.Lock()
		if len(tasks) > 0 || err != nil || w.end {
			w.done = true
			w.mu.Unlock()
			w.cleanUp()
			w.e.sawWorker(w.p, len(tasks))
			if tasks == nil {
				tasks = []LeasedTask{}
			}
			w.answer(tasks, err)
			return
		}
		if !w.again {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.again = false
		w.mu.Unlock()
	}
}

// expire ends the wait: at once when no lease is under way, else once it is done.
func (w *asyncPoll) expire() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.end = true
	if w.running {
		w.mu.Unlock()
		return // the lease under way answers
	}
	w.done = true
	w.mu.Unlock()
	w.cleanUp()
	w.answer([]LeasedTask{}, nil)
}

// cleanUp takes the ended poll off the board, outside w.mu: the board calls fire, which takes
// w.mu, with its own lock held.
func (w *asyncPoll) cleanUp() {
	w.unregister()
	w.timer.Stop()
	w.stopCtx()
	if w.stopRun != nil {
		w.stopRun()
	}
}

// PollTasks leases up to p.Max tasks of p's modules to p.WorkerID, waiting up to p.Wait for
// the first one. It answers as soon as at least one is leased; an empty list when the wait
// ends (or ctx does). A waiting poll holds no timer but its deadline: the board wakes it.
func (e *Executor) PollTasks(ctx context.Context, p TaskPoll) ([]LeasedTask, error) {
	e.sawWorker(p, 0)
	wait := &taskPoll{modules: map[string]bool{}, wake: make(chan struct{}, 1)}
	for _, m := range p.Modules {
		wait.modules[m] = true
	}
	b := e.tasks
	b.mu.Lock()
	set := b.polls[p.WorkspaceID]
	if set == nil {
		set = map[*taskPoll]struct{}{}
		b.polls[p.WorkspaceID] = set
	}
	set[wait] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.polls[p.WorkspaceID], wait)
		if len(b.polls[p.WorkspaceID]) == 0 {
			delete(b.polls, p.WorkspaceID)
		}
		b.mu.Unlock()
	}()
	// A poll ends when the executor stops (serve's shutdown), so as not to hold it up.
	e.mu.Lock()
	var stopping <-chan struct{}
	if e.ctx != nil {
		stopping = e.ctx.Done()
	}
	e.mu.Unlock()
	var deadline <-chan time.Time
	if p.Wait > 0 {
		t := time.NewTimer(p.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		tasks, err := e.leaseTasks(ctx, p)
		if err != nil || len(tasks) > 0 || deadline == nil {
			e.sawWorker(p, len(tasks))
			return tasks, err
		}
		select {
		case <-wait.wake:
		case <-deadline:
			return []LeasedTask{}, nil
		case <-ctx.Done():
			return []LeasedTask{}, nil
		case <-stopping:
			return []LeasedTask{}, nil
		}
	}
}

// leaseTasks leases what p may take of the board now.
func (e *Executor) leaseTasks(ctx context.Context, p TaskPoll) ([]LeasedTask, error) {
	var out []LeasedTask
	if len(p.AllowedWorkflowIDs) > 0 {
		e.resolveWorkflows(ctx, p)
	}
	for len(out) < p.Max {
		ids := e.takeCandidates(p, p.Max-len(out))
		if len(ids) == 0 {
			break
		}
		// The leases go out together: the store commits concurrent appends together.
		leased := make([]LeasedTask, len(ids))
		ok := make([]bool, len(ids))
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				leased[i], ok[i], errs[i] = e.leaseOne(ctx, id, p)
			}()
		}
		wg.Wait()
		for i := range ids {
			if ok[i] {
				out = append(out, leased[i])
			}
		}
		if err := errors.Join(errs...); err != nil {
			if len(out) == 0 {
				return out, err
			}
			e.log.WithError(err).Warn("some leases of a poll failed; the tasks leased are answered")
			return out, nil
		}
	}
	return out, nil
}

// takeCandidates takes up to n pending tasks of p's modules off the board for p to lease,
// oldest first, module by module in turn, within each module's concurrency. A task of a run
// of a workflow a scoped key does not allow stays on the board.
func (e *Executor) takeCandidates(p TaskPoll, n int) []string {
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	mods := append([]string(nil), p.Modules...)
	sort.Strings(mods)
	for progress := true; progress && len(out) < n; {
		progress = false
		for _, m := range mods {
			key := wsModule{p.WorkspaceID, m}
			q := b.pending[key]
			for i := 0; i < len(q) && len(out) < n; i++ {
				t := b.tasks[q[i]]
				if t == nil || t.phase != phasePending || !t.queued {
					q = append(q[:i], q[i+1:]...) // stale id: its task ended or moved on
					i--
					continue
				}
				if t.concurrency > 0 && b.leased[key]+b.trying(key)+b.reserved[key] >= t.concurrency {
					break
				}
				if len(p.AllowedWorkflowIDs) > 0 && !allowed(p.AllowedWorkflowIDs, t.workflowID) {
					continue // resolveWorkflows looked its workflow up
				}
				q = append(q[:i], q[i+1:]...)
				t.queued, t.trying = false, true
				out = append(out, t.id)
				progress = true
				break // one per module per turn: modules share the poll fairly
			}
			if len(q) == 0 {
				delete(b.pending, key)
			} else {
				b.pending[key] = q
			}
		}
	}
	return out
}

// resolveWorkflows looks up the workflows of the pending run stages of p's modules, for a
// scoped key's poll, once per task.
func (e *Executor) resolveWorkflows(ctx context.Context, p TaskPoll) {
	b := e.tasks
	b.mu.Lock()
	runs := map[string]string{}
	for _, m := range p.Modules {
		for _, id := range b.pending[wsModule{p.WorkspaceID, m}] {
			if t := b.tasks[id]; t != nil && t.runID != "" && t.workflowID == "" {
				runs[t.runID] = ""
			}
		}
	}
	b.mu.Unlock()
	for run := range runs {
		wf, err := e.workflowOf(ctx, run)
		if err != nil {
			continue
		}
		runs[run] = wf
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range p.Modules {
		for _, id := range b.pending[wsModule{p.WorkspaceID, m}] {
			if t := b.tasks[id]; t != nil && t.workflowID == "" {
				t.workflowID = runs[t.runID]
			}
		}
	}
}

// trying counts the tasks of key being leased now; b.mu is held. Few polls run at once, so a
// count over the queue's tasks is not kept.
func (b *taskBoard) trying(key wsModule) int {
	n := 0
	for _, t := range b.tasks {
		if t.trying && t.workspace == key.workspace && t.module == key.module {
			n++
		}
	}
	return n
}

func allowed(ids []string, id string) bool {
	for _, a := range ids {
		if a == id && id != "" {
			return true
		}
	}
	return false
}

// leaseOne leases the task id to p's worker by appending its claim at the revision read.
func (e *Executor) leaseOne(ctx context.Context, id string, p TaskPoll) (LeasedTask, bool, error) {
	st, err := e.cmds.Attempts.LeaseTask(ctx, id, p.WorkerID, e.opts.TaskLease)
	b := e.tasks
	b.mu.Lock()
	t := b.tasks[id]
	if t != nil {
		t.trying = false
	}
	leased := err == nil && st.Worker == p.WorkerID && st.HoldsTask(st.Attempt) && st.LeaseUntil.After(e.opts.Now())
	if leased && t != nil {
		t.local = true
	}
	b.mu.Unlock()
	switch {
	case errors.Is(err, execution.ErrNotClaimable), errors.Is(err, domain.ErrNotFound):
		if st, err = e.cmds.Attempts.Execution(ctx, id); err != nil {
			e.dropTask(id)
			return LeasedTask{}, false, nil
		}
	case err != nil:
		e.requeueTask(id)
		return LeasedTask{}, false, fmt.Errorf("lease task: %w", err)
	}
	e.observeTask(ctx, st)
	if !leased {
		return LeasedTask{}, false, nil
	}
	return e.taskOf(st), true, nil
}

// taskOf is the leased attempt of st as a worker sees it.
func (e *Executor) taskOf(st execution.State) LeasedTask {
	timeout := modules.DefaultTimeout
	if st.TimeoutMs > 0 {
		timeout = time.Duration(st.TimeoutMs) * time.Millisecond
	}
	return LeasedTask{Task: Task{TaskID: execution.TaskID(st.ID, st.Attempt), ExecutionID: st.ID, Module: st.Module, Input: st.Input,
		Config: st.Config, Attempt: st.Attempt, Deadline: e.opts.Now().Add(timeout).UTC(), RunID: st.RunID, StageID: st.StageID},
		LeaseExpiresAt: st.LeaseUntil}
}

// dropTask forgets a task whose stream cannot be read.
func (e *Executor) dropTask(id string) {
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tasks[id]; t != nil {
		b.forget(t)
	}
}

// requeueTask puts a task a poll could not lease (the store failed) back on the board.
func (e *Executor) requeueTask(id string) {
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tasks[id]; t != nil && t.phase == phasePending && !t.queued {
		t.phase = -1
		b.setPhase(t, phasePending)
	}
}

// ErrTaskNotFound: no task of the caller's workspace has the id (404).
var ErrTaskNotFound = fmt.Errorf("task: %w", domain.ErrNotFound)

// heldTask reads the execution of taskID for workspace: not found unless it is a worker task
// of the workspace (and of a workflow a scoped key allows), execution.ErrTaskNotHeld unless
// its attempt is leased now.
func (e *Executor) heldTask(ctx context.Context, workspaceID string, allowedWorkflows []string, taskID string, fresh bool) (execution.State, int, error) {
	id, attempt, ok := execution.ParseTaskID(taskID)
	if !ok {
		return execution.State{}, 0, ErrTaskNotFound
	}
	// The state this process recorded last (its poll leased the task, say) spares a read when
	// it shows the lease held: the append expects its revision all the same. A completion reads
	// afresh: its charge is made even when the completion then finds the lease lost.
	st, cached := e.cmds.Attempts.CachedExecution(id, 0)
	var err error
	if fresh || !cached || !st.HoldsTask(attempt) {
		st, err = e.cmds.Attempts.Execution(ctx, id)
	}
	if errors.Is(err, domain.ErrNotFound) || (err == nil && (st.WorkspaceID != workspaceID || !st.WorkerTask() || attempt > max(st.Attempt, 1))) {
		return execution.State{}, 0, ErrTaskNotFound
	}
	if err != nil {
		return execution.State{}, 0, err
	}
	if len(allowedWorkflows) > 0 {
		wf, err := e.workflowOf(ctx, st.RunID)
		if err != nil {
			return execution.State{}, 0, err
		}
		if !allowed(allowedWorkflows, wf) {
			return execution.State{}, 0, ErrTaskNotFound
		}
	}
	if !st.HoldsTask(attempt) {
		return st, attempt, execution.ErrTaskNotHeld
	}
	return st, attempt, nil
}

// workflowOf is the workflow of run runID ("" for none).
func (e *Executor) workflowOf(ctx context.Context, runID string) (string, error) {
	if runID == "" {
		return "", nil
	}
	r, err := e.cmds.Workflows.Run(ctx, runID)
	if err != nil {
		return "", err
	}
	return r.WorkflowID, nil
}

// TaskCaller is who calls a task endpoint: the key's workspace and, for a scoped key, the
// workflows it allows.
type TaskCaller struct {
	WorkspaceID        string
	AllowedWorkflowIDs []string
	// Claim, when set, is the request's signature claim, which a completion takes in the
	// commit of its outcome and charge (commands.RequestClaim).
	Claim *commands.RequestClaim
}

// HeartbeatTask renews the lease of taskID and reports whether its run was cancelled.
func (e *Executor) HeartbeatTask(ctx context.Context, c TaskCaller, taskID string) (time.Time, bool, error) {
	st, attempt, err := e.heldTask(ctx, c.WorkspaceID, c.AllowedWorkflowIDs, taskID, false)
	if err != nil {
		return time.Time{}, false, err
	}
	after, err := e.cmds.Attempts.ExtendTask(ctx, st.ID, attempt, e.opts.TaskLease)
	if err != nil {
		return time.Time{}, false, err
	}
	e.observeTask(ctx, after)
	cancelled := false
	if after.RunID != "" {
		r, err := e.cmds.Workflows.Run(ctx, after.RunID)
		if err != nil {
			return time.Time{}, false, err
		}
		cancelled = !r.CancelAt.IsZero()
	}
	return after.LeaseUntil, cancelled, nil
}

// CompleteTask records the output of taskID's attempt, charged as a built-in's is: the
// module's price once per successful execution, in the commit of the completion when it can
// be. An output the store cannot hold fails the attempt (output_unstorable), as a built-in's.
//
// The state this process recorded last (its poll leased the task) is trusted when it shows
// the lease held, and the completion then goes in one commit with its charge and the request's
// claim, or not at all (ChargedFinish.Combined): a stale state fails that commit on revision,
// and the completion is decided again on the state read afresh, the usual way. So a completion
// costs one commit and no read, and an attempt whose lease was lost is never charged for it.
func (e *Executor) CompleteTask(ctx context.Context, c TaskCaller, taskID string, output json.RawMessage) (execution.State, error) {
	st, _, err := e.heldTask(ctx, c.WorkspaceID, c.AllowedWorkflowIDs, taskID, false)
	if err != nil {
		return execution.State{}, err
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	if err := e.checkOutput(ctx, st, output); err != nil {
		return execution.State{}, err
	}
	usage := billing.Credits(st.CostMilli)
	after, err := e.completeWith(ctx, st, output, usage, commands.ChargedFinish{Claim: c.Claim, Combined: true})
	if errors.Is(err, commands.ErrNotCombined) {
		if st, _, err = e.heldTask(ctx, c.WorkspaceID, c.AllowedWorkflowIDs, taskID, true); err != nil {
			return execution.State{}, err
		}
		after, err = e.complete(ctx, st, output, usage)
	}
	return e.taskOutcome(ctx, after, err)
}

// checkOutput holds output to the module's outputSchema: a 400 naming the field, the task
// still leased. A module deleted meanwhile lets its tasks in flight finish unchecked.
func (e *Executor) checkOutput(ctx context.Context, st execution.State, output json.RawMessage) error {
	m, err := e.taskModule(ctx, st.WorkspaceID, st.Module)
	if errors.Is(err, module.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	schemas, err := e.cmds.Modules.Schemas(m)
	if err != nil {
		return err
	}
	err = schemas.ValidateOutput(output)
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		return domain.Invalid(ve.Field, "%s", ve.Message)
	}
	return err
}

// moduleReuse is how long a module read for an output check serves the next ones: an update
// of its outputSchema applies to the outputs reported that much later at most.
const moduleReuse = time.Second

type seenModule struct {
	m  module.Module
	at time.Time
}

// taskModule is the workspace module name, read at most once per moduleReuse.
func (e *Executor) taskModule(ctx context.Context, workspaceID, name string) (module.Module, error) {
	key := wsModule{workspaceID, name}
	b := e.tasks
	b.mu.Lock()
	seen, ok := b.modules[key]
	b.mu.Unlock()
	if ok && e.opts.Now().Sub(seen.at) < moduleReuse {
		return seen.m, nil
	}
	m, err := e.cmds.Modules.Get(ctx, workspaceID, name)
	if err != nil {
		return m, err
	}
	b.mu.Lock()
	b.modules[key] = seenModule{m: m, at: e.opts.Now()}
	b.mu.Unlock()
	return m, nil
}

// FailTask records the failure of taskID's attempt: retried while attempts remain and
// retryable is true (a stage's retry policy decides as for built-ins), else final.
func (e *Executor) FailTask(ctx context.Context, c TaskCaller, taskID string, f *modules.Failure, retryable bool) (execution.State, error) {
	st, _, err := e.heldTask(ctx, c.WorkspaceID, c.AllowedWorkflowIDs, taskID, false)
	if err != nil {
		return execution.State{}, err
	}
	after, err := e.fail(ctx, st, storableFailure(f), retryable)
	return e.taskOutcome(ctx, after, err)
}

// taskOutcome puts a recorded outcome on the board; a lease lost meanwhile is ErrTaskNotHeld.
func (e *Executor) taskOutcome(ctx context.Context, after execution.State, err error) (execution.State, error) {
	if errors.Is(err, execution.ErrLeaseLost) {
		return execution.State{}, execution.ErrTaskNotHeld
	}
	if err != nil {
		return execution.State{}, err
	}
	e.observeTask(ctx, after)
	return after, nil
}
