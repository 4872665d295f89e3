package commands

// WithRunWaker returns c whose triggers tell wake, this process's scheduler, of each run they
// write, so that it starts the run at once instead of when the log brings the trigger to it.
// The log still does, to every instance: a run whose wake-up is lost starts all the same.
func WithRunWaker(c *Commands, wake func(runID string)) *Commands {
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
