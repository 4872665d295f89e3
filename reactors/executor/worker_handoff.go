package executor

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
)

// Handing a submitted task to a waiting poll: when a worker's poll waits in this process for
// a module, a submit of a call to it leases the call's first attempt to that poll's worker in
// the submit's own commit (commands.TaskHandoffs), and the poll answers with it. The task
// costs one commit from submit to worker instead of two, and no wake-up hop. The lease is a
// lease like a poll's: the append of the submit carries it, so no other worker or instance can
// lease the attempt, and this process watches it as it watches the leases its polls make.

// ReservePoll implements commands.TaskHandoffs: it reserves a poll waiting on this board for
// sub's module that may take sub's task now. A reserved poll answers nothing else (a wake-up
// meanwhile is looked at once it is released); its wait ending meanwhile ends it after.
func (e *Executor) ReservePoll(sub execution.Submit) (commands.PollHandoff, bool) {
	e.mu.Lock()
	ctx := e.ctx
	e.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return nil, false
	}
	b := e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	key := wsModule{sub.WorkspaceID, sub.Module}
	if sub.Transport != nil && sub.Transport.Concurrency > 0 && b.leased[key]+b.trying(key)+b.reserved[key] >= sub.Transport.Concurrency {
		return nil, false
	}
	for p := range b.polls[sub.WorkspaceID] {
		// A scoped key's poll leases only tasks of its workflows' runs; a submit is of none.
		if p.async == nil || !p.modules[sub.Module] || len(p.async.p.AllowedWorkflowIDs) > 0 || !p.async.reserve() {
			continue
		}
		b.reserved[key]++
		return &handoff{e: e, ctx: ctx, w: p.async, key: key}, true
	}
	return nil, false
}

// handoff is a poll reserved for one submitted task.
type handoff struct {
	e   *Executor
	ctx context.Context
	w   *asyncPoll
	key wsModule
}

func (h *handoff) Worker() string       { return h.w.p.WorkerID }
func (h *handoff) Lease() time.Duration { return h.e.opts.TaskLease }

// unreserve takes the reservation off the module's count.
func (h *handoff) unreserve() {
	b := h.e.tasks
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reserved[h.key]--; b.reserved[h.key] <= 0 {
		delete(b.reserved, h.key)
	}
}

// Deliver answers the poll with st's task, leased to its worker by the submit's commit, and
// watches the lease as a lease of this process's polls.
func (h *handoff) Deliver(st execution.State) {
	e := h.e
	b := e.tasks
	b.mu.Lock()
	if t := b.tasks[st.ID]; t != nil && t.phase == phaseLeased && t.seq == factOf(st).seq() {
		t.local = true
		e.watchLease(h.ctx, t)
	}
	if b.reserved[h.key]--; b.reserved[h.key] <= 0 {
		delete(b.reserved, h.key)
	}
	b.mu.Unlock()
	h.w.deliver(e.taskOf(st))
}

// Release gives the poll back to its wait.
func (h *handoff) Release() {
	h.unreserve()
	h.w.release()
}

// reserve marks a waiting poll as taken by a submit; false when it is answering, leasing or
// reserved already. The board's lock is held (the order is the board's, then the poll's).
func (w *asyncPoll) reserve() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.running || w.end || w.ctx.Err() != nil {
		return false
	}
	w.running = true // a wake-up meanwhile sets again; the wait's end sets end
	return true
}

// deliver answers a reserved poll with the task a submit leased to it.
func (w *asyncPoll) deliver(t LeasedTask) {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.cleanUp()
	w.e.sawWorker(w.p, 1)
	w.answer([]LeasedTask{t}, nil)
}

// release ends a reservation that leased nothing: the poll waits on, leases from the board at
// once when a wake-up came meanwhile, or answers empty when its wait ended meanwhile.
func (w *asyncPoll) release() {
	w.mu.Lock()
	if w.end {
		w.done = true
		w.mu.Unlock()
		w.cleanUp()
		w.answer([]LeasedTask{}, nil)
		return
	}
	if !w.again {
		w.running = false
		w.mu.Unlock()
		return
	}
	w.again = false
	w.mu.Unlock()
	go w.lease()
}

var _ commands.TaskHandoffs = (*Executor)(nil)
