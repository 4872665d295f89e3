package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/decoded"
	"github.com/switchyard/switchyard/reactors/feed"
)

// The task board: the attempts of workspace modules with a worker transport (issue 28) are
// never run here; they wait on this board until a worker's poll leases them (tasks_lease.go).
// Every instance keeps a board of the tasks it knows of, learned from its own submits (Take)
// and from the log (a feed of the execution events), and wakes the polls waiting on it when a
// task becomes leasable: no timer looks for work. The board is a cache: the execution stream
// decides (a lease appends at the revision read), and the sweep finds what a board missed
// (tasks of before a restart, leases that ran out on an instance that died).

// taskPhase orders what the board knows of a task, so that an event the feed delivers after
// this process already recorded something later is ignored.
type taskPhase int

const (
	phasePending taskPhase = iota // leasable now
	phaseLeased                   // leased until leaseUntil
	phaseWaiting                  // failed, retried at retryAt
	phaseGone                     // ended; kept until its end comes through the feed
)

type wsModule struct{ workspace, module string }

// boardTask is one worker-transport execution the board knows of.
type boardTask struct {
	id, workspace, module, runID string
	concurrency                  int
	phase                        taskPhase
	// seq orders the task's facts: attempt*4 plus the rank of the fact (started 1, extended 2,
	// ended 3); a fact below the one recorded is stale.
	seq        int
	worker     string
	leaseUntil time.Time
	retryAt    time.Time
	// queued: in its module's pending queue; trying: a poll is leasing it now.
	queued, trying bool
	// local: leased by a poll of this process, which watches its lease.
	local bool
	timer *time.Timer
	// follows is the first call of the cache window a free repeat waits for (followTask):
	// while set, the task is not leasable.
	follows string
	// workflowID is the run's workflow, looked up for scoped keys ("" until then).
	workflowID string
	waiters    []chan execution.State
}

// taskBoard is the board of one process.
type taskBoard struct {
	mu      sync.Mutex
	tasks   map[string]*boardTask
	pending map[wsModule][]string
	leased  map[wsModule]int
	// reserved counts the polls reserved for a submit's task (ReservePoll), by module, so
	// that a module's concurrency counts them.
	reserved map[wsModule]int
	polls    map[string]map[*taskPoll]struct{} // by workspace
	workers  map[workerKey]*workerSeen
	// workersOf counts workers by workspace, so one workspace's many worker ids stay bounded.
	workersOf map[string]int
	// prunedAt is when silent workers were last forgotten.
	prunedAt time.Time
	// modules are the workspace modules read for output checks (taskModule).
	modules map[wsModule]seenModule
}

func newTaskBoard() *taskBoard {
	return &taskBoard{tasks: map[string]*boardTask{}, pending: map[wsModule][]string{}, leased: map[wsModule]int{},
		reserved: map[wsModule]int{}, polls: map[string]map[*taskPoll]struct{}{}, workers: map[workerKey]*workerSeen{},
		workersOf: map[string]int{}, modules: map[wsModule]seenModule{}}
}

// taskEvents are the execution events the board follows.
var taskEvents = []string{execution.Submitted{}.EventType(), execution.Started{}.EventType(), execution.LeaseExtended{}.EventType(),
	execution.AttemptFailed{}.EventType(), execution.Completed{}.EventType(), execution.Failed{}.EventType()}

// openTasks subscribes the board to the log before the executor takes work, so no task
// created after it is missed; the sweep finds those of before.
func (e *Executor) openTasks(ctx context.Context) error {
	events, err := feed.Open(ctx, e.store, eventstore.Filter{Types: taskEvents}, e.log)
	if err != nil {
		return err
	}
	go func() {
		for ev := range events {
			e.taskEvent(ctx, ev)
		}
	}()
	return nil
}

// taskFact is an event of a task reduced to what the board keeps.
type taskFact struct {
	attempt       int
	rank          int // 0 submitted, 1 started, 2 extended, 3 ended
	phase         taskPhase
	worker        string
	until, retry  time.Time
	end, terminal bool
}

func (f taskFact) seq() int { return f.attempt*4 + f.rank }

// taskEvent applies an event of the log to the board.
func (e *Executor) taskEvent(ctx context.Context, ev eventstore.RecordedEvent) {
	id := strings.TrimPrefix(ev.Stream, execution.Category+"-")
	if ev.Type == (execution.Submitted{}).EventType() {
		d, err := decoded.Event(ev)
		if sub, ok := d.(execution.Submitted); err == nil && ok && sub.Transport != nil && sub.Transport.Type == execution.TransportWorker {
			st := execution.State{}.Evolve(sub)
			e.addTask(ctx, st)
		}
		return
	}
	e.tasks.mu.Lock()
	_, known := e.tasks.tasks[id]
	e.tasks.mu.Unlock()
	if !known {
		return // a built-in's event, or a task ended and forgotten
	}
	var body struct {
		Attempt    int       `json:"attempt"`
		Worker     string    `json:"worker"`
		LeaseUntil time.Time `json:"leaseUntil"`
		RetryAt    time.Time `json:"retryAt"`
	}
	if err := json.Unmarshal(ev.Data, &body); err != nil {
		return
	}
	f := taskFact{attempt: body.Attempt}
	switch ev.Type {
	case execution.Started{}.EventType():
		f.rank, f.phase, f.worker, f.until = 1, phaseLeased, body.Worker, body.LeaseUntil
	case execution.LeaseExtended{}.EventType():
		f.rank, f.phase, f.until = 2, phaseLeased, body.LeaseUntil
	case execution.AttemptFailed{}.EventType():
		f.rank, f.phase, f.retry = 3, phaseWaiting, body.RetryAt
	default: // Completed, Failed
		f.rank, f.phase, f.end, f.terminal = 3, phaseGone, true, true
	}
	e.applyTaskFact(ctx, id, f, true, nil)
}

// factOf reduces a state this process just recorded to the board's fact.
func factOf(st execution.State) taskFact {
	switch {
	case st.Status.Terminal():
		return taskFact{attempt: st.Attempt, rank: 3, phase: phaseGone, terminal: true}
	case !st.RetryAt.IsZero():
		return taskFact{attempt: st.Attempt, rank: 3, phase: phaseWaiting, retry: st.RetryAt}
	case st.Status == execution.StatusRunning:
		return taskFact{attempt: st.Attempt, rank: 2, phase: phaseLeased, worker: st.Worker, until: st.LeaseUntil}
	}
	return taskFact{phase: phasePending}
}

// observeTask applies a state this process recorded (or read) to the board.
func (e *Executor) observeTask(ctx context.Context, st execution.State) {
	if !st.WorkerTask() {
		return
	}
	if st.Status.Terminal() {
		// An ended task the board does not know (forgotten when its end came through the
		// feed) stays unknown: nothing would forget it again.
		e.tasks.mu.Lock()
		_, known := e.tasks.tasks[st.ID]
		e.tasks.mu.Unlock()
		if !known {
			return
		}
	}
	e.addTask(ctx, st)
	e.applyTaskFact(ctx, st.ID, factOf(st), false, &st)
}

// applyTaskFact moves the task to f unless the board knows something later already. A task's
// end is forgotten only when it comes through the feed (fromLog): no event of its stream that
// the board follows can come after it. st, when set, is the state f comes from, handed to the
// waiters of an ended task as it is.
func (e *Executor) applyTaskFact(ctx context.Context, id string, f taskFact, fromLog bool, st *execution.State) {
	b := e.tasks
	b.mu.Lock()
	t := b.tasks[id]
	if t == nil || f.seq() < t.seq || (f.seq() == t.seq && t.phase == phaseGone) {
		if t != nil && fromLog && f.terminal && t.phase == phaseGone {
			b.forget(t)
		}
		b.mu.Unlock()
		return
	}
	t.seq = f.seq()
	if f.worker != "" {
		t.worker = f.worker
	}
	b.setPhase(t, f.phase)
	var waiters []chan execution.State
	switch f.phase {
	case phaseLeased:
		if f.until.After(t.leaseUntil) {
			t.leaseUntil = f.until
		}
		if t.local {
			e.watchLease(ctx, t)
		}
	case phaseWaiting:
		t.retryAt = f.retry
		e.retryTaskAt(ctx, t)
	case phaseGone:
		waiters, t.waiters = t.waiters, nil
		if fromLog {
			b.forget(t)
		}
	}
	b.mu.Unlock()
	if len(waiters) > 0 {
		e.sendEnd(ctx, id, st, waiters)
	}
}

// sendEnd hands the ended execution to the submits waiting for it (waitForMs).
func (e *Executor) sendEnd(ctx context.Context, id string, known *execution.State, waiters []chan execution.State) {
	var st execution.State
	if known != nil && known.Status.Terminal() {
		st = *known
	} else if read, err := e.cmds.Attempts.Execution(context.WithoutCancel(ctx), id); err == nil {
		st = read
	}
	for _, ch := range waiters {
		ch <- st
	}
}

// addTask puts a task the board does not know yet on it, pending when it is leasable. A free
// repeat not tried yet waits for its window's first call instead (followTask).
func (e *Executor) addTask(ctx context.Context, st execution.State) {
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.tasks[st.ID]; ok {
		return
	}
	t := &boardTask{id: st.ID, workspace: st.WorkspaceID, module: st.Module, runID: st.RunID, phase: -1}
	if st.Transport != nil {
		t.concurrency = st.Transport.Concurrency
	}
	b.tasks[st.ID] = t
	f := factOf(st)
	if st.CachedFrom != "" && st.Attempt == 0 && f.phase == phasePending {
		t.follows = st.CachedFrom
		go e.followTask(ctx, st.ID, st.CachedFrom)
	}
	t.seq = f.seq()
	b.setPhase(t, f.phase)
	switch f.phase {
	case phaseLeased:
		t.worker, t.leaseUntil = st.Worker, st.LeaseUntil
	case phaseWaiting:
		t.retryAt = st.RetryAt
	}
}

// setPhase moves t to phase, keeping the pending queues and leased counts; b.mu is held.
func (b *taskBoard) setPhase(t *boardTask, phase taskPhase) {
	if t.phase == phase {
		return
	}
	key := wsModule{t.workspace, t.module}
	if t.phase == phaseLeased {
		b.leased[key]--
		if b.leased[key] <= 0 {
			delete(b.leased, key)
		}
		if t.concurrency > 0 && len(b.pending[key]) > 0 {
			b.wake(t) // a slot of the module's concurrency is free for a waiting task
		}
	}
	if t.timer != nil && phase != phaseLeased && phase != phaseWaiting {
		t.timer.Stop()
		t.timer = nil
	}
	t.phase = phase
	switch phase {
	case phaseLeased:
		b.leased[key]++
	case phasePending:
		b.enqueue(t)
	}
}

// enqueue makes a pending task leasable, unless it follows a first call; b.mu is held.
func (b *taskBoard) enqueue(t *boardTask) {
	if t.follows != "" {
		return
	}
	if !t.queued && !t.trying {
		t.queued = true
		key := wsModule{t.workspace, t.module}
		b.pending[key] = append(b.pending[key], t.id)
	}
	b.wake(t)
}

// followTask completes a free repeat of a worker module with the output of its cache window's
// first call once that call has completed (SPEC.md 2.1: free, the first call's result): no
// worker runs it. Every instance that knows the repeat follows it; the lease decides which one
// records it. When the first call failed or cannot be found, the repeat becomes leasable and
// runs, and bills, as a call of its own.
func (e *Executor) followTask(ctx context.Context, id, leaderID string) {
	leader, err := e.awaitEnd(ctx, leaderID)
	if err == nil && leader.Status == execution.StatusCompleted {
		st, err := e.cmds.Attempts.LeaseTask(ctx, id, e.opts.Worker, e.opts.TaskLease)
		if err == nil && st.Worker == e.opts.Worker && st.HoldsTask(st.Attempt) {
			st, err = e.cmds.Attempts.CompleteExecution(ctx, id, e.opts.Worker, st.Attempt, leader.Output, 0)
		}
		if err == nil {
			e.observeTask(ctx, st)
		}
		// Otherwise another instance leased it first and records it, or the task moved on
		// (its end, or an expired lease's retry, comes through the feed).
	}
	if ctx.Err() != nil {
		return
	}
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tasks[id]; t != nil {
		t.follows = ""
		if t.phase == phasePending {
			b.enqueue(t)
		}
	}
}

// forget drops an ended task; b.mu is held.
func (b *taskBoard) forget(t *boardTask) {
	b.setPhase(t, phaseGone)
	if t.timer != nil {
		t.timer.Stop()
	}
	delete(b.tasks, t.id)
	// Its id may still sit in a pending queue; takeCandidates skips ids no longer pending.
}

// retryTaskAt makes a waiting task pending again when its retry is due; b.mu is held.
func (e *Executor) retryTaskAt(ctx context.Context, t *boardTask) {
	if t.timer != nil {
		t.timer.Stop()
	}
	id, seq := t.id, t.seq
	t.timer = time.AfterFunc(max(t.retryAt.Sub(e.opts.Now()), 0), func() {
		b := e.tasks
		b.mu.Lock()
		defer b.mu.Unlock()
		if cur := b.tasks[id]; cur == t && t.seq == seq && t.phase == phaseWaiting && ctx.Err() == nil {
			t.timer = nil
			b.setPhase(t, phasePending)
		}
	})
}

// watchLease expires the lease of a task leased here once it has run out unrenewed
// (lease_expired), so the next attempt can be leased; b.mu is held. Should this process stop
// first, the sweep of any instance finds the lease run out in the read model.
func (e *Executor) watchLease(ctx context.Context, t *boardTask) {
	if t.timer != nil {
		t.timer.Stop()
	}
	id := t.id
	t.timer = time.AfterFunc(max(t.leaseUntil.Sub(e.opts.Now()), 0)+10*time.Millisecond, func() {
		if ctx.Err() != nil {
			return
		}
		e.expireTask(ctx, id)
	})
}

// expireTask fails the task's attempt when its lease ran out, or watches the lease again
// when a heartbeat renewed it meanwhile.
func (e *Executor) expireTask(ctx context.Context, id string) {
	st, err := e.cmds.Attempts.ExpireTask(ctx, id)
	if err != nil {
		if st, err = e.cmds.Attempts.Execution(ctx, id); err != nil {
			if ctx.Err() == nil {
				e.log.WithError(err).WithField("executionId", id).Warn("cannot read a task whose lease ran out; a sweep will expire it")
			}
			return
		}
	}
	e.observeTask(ctx, st)
}

// takeTask queues a task just submitted on this process (Runner.Take): the channel receives
// the ended execution, for a submit that waits (waitForMs).
func (e *Executor) takeTask(ctx context.Context, st execution.State) <-chan execution.State {
	ch := make(chan execution.State, 1)
	e.addTask(ctx, st)
	b := e.tasks
	b.mu.Lock()
	if t := b.tasks[st.ID]; t != nil && t.phase != phaseGone {
		t.waiters = append(t.waiters, ch)
	}
	b.mu.Unlock()
	return ch
}

// sweptTask handles a worker task the sweep found claimable in the read model: an expired
// lease is failed, a leasable task put on the board.
func (e *Executor) sweptTask(ctx context.Context, st execution.State) {
	if st.LeaseExpired(e.opts.Now()) {
		after, err := e.cmds.Attempts.ExpireTask(ctx, st.ID)
		if err == nil {
			st = after
		}
	}
	e.observeTask(ctx, st)
}

// pendingTask reports whether the board has id waiting for a worker already, so the sweep
// need not read it.
func (e *Executor) pendingTask(id string) bool {
	e.tasks.mu.Lock()
	defer e.tasks.mu.Unlock()
	t := e.tasks.tasks[id]
	return t != nil && t.phase == phasePending
}
