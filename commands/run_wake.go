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
	wired := *c
	w := *c.Workflows
	w.wake = wake
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
