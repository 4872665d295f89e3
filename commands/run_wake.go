package commands

import "github.com/switchyard/switchyard/domain/run"

// RunWaker is told of a run this process has just triggered: the run as its trigger's commit
// left it, and the module stages that commit dispatched (a run's first step goes into its
// trigger's commit, firstStep), which the scheduler is to start.
type RunWaker func(st run.State, dispatched []run.Stage)

// WithRunWaker returns c whose triggers tell wake, this process's scheduler, of each run they
// write, so that it starts the run at once instead of when the log brings the trigger to it.
// The log still does, to every instance: a run whose wake-up is lost starts all the same.
func WithRunWaker(c *Commands, wake RunWaker) *Commands {
	return withWorkflows(c, func(w *Workflows) { w.wake = wake })
}

// RunAnnouncer is told of each run this process is about to trigger, before its trigger is
// written: what is to hear every record of the run from its first on starts listening then.
type RunAnnouncer func(runID string)

// WithRunAnnouncer returns c whose triggers tell announce of each run before writing it
// (serve's live hub, which then tracks the run's records: livehub.Hub.Expect).
func WithRunAnnouncer(c *Commands, announce RunAnnouncer) *Commands {
	return withWorkflows(c, func(w *Workflows) { w.announce = announce })
}

// withWorkflows returns c with a copy of its Workflows, set by set, which the nouns that start
// runs through Workflows use too.
func withWorkflows(c *Commands, set func(*Workflows)) *Commands {
	wired := *c
	w := *c.Workflows
	set(&w)
	wired.Workflows = &w
	// The nouns that start runs through Workflows start them through the wired one.
	s := *c.Schedules
	s.workflows = &w
	wired.Schedules = &s
	ev := *c.Events
	ev.workflows = &w
	wired.Events = &ev
	hk := *c.Hooks
	hk.workflows = &w
	wired.Hooks = &hk
	bk := *c.Bulks
	bk.workflows = &w
	wired.Bulks = &bk
	wt := *c.Waits
	wt.workflows = &w
	wired.Waits = &wt
	return &wired
}
