package run

import "github.com/switchyard/switchyard/domain/execution"

// FactsOf is what an execution's state says about its stage. An ended execution also says
// which attempt it started last: a sweep that finds it ended before the live feed delivered
// its Started events must not leave the stage at an earlier attempt, since the stage is
// terminal once the end is recorded and later Started facts are ignored.
func FactsOf(ex execution.State) []Fact {
	started := Fact{ExecutionID: ex.ID, Kind: FactStarted, Attempt: ex.Attempt, At: ex.UpdatedAt}
	f := started
	switch ex.Status {
	case execution.StatusRunning:
		return []Fact{started}
	case execution.StatusCompleted:
		f.Kind, f.Output, f.Usage = FactCompleted, ex.Output, ex.TotalUsage
	case execution.StatusFailed:
		f.Kind, f.Error = FactFailed, ex.Error
	default:
		return nil
	}
	if ex.Attempt == 0 {
		return []Fact{f} // ended without starting (cancelled or refused while queued)
	}
	return []Fact{started, f}
}
