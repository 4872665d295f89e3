package console

import (
	"encoding/json"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

// The run page's JSON: the run detail with its workflow drawn, which run.js refetches on each
// event of the run stream.

// RunDetail is the page's JSON: the run detail (SPEC.md 2.4) with the workflow
// drawn, one entry per component of the definition the run started with.
type RunDetail struct {
	run.Detail
	// DisplayStatus is the status as the page says it: CANCELED for a canceled run, which
	// the API reports as FAILED (SPEC.md 3).
	DisplayStatus string `json:"displayStatus"`
	// ErrorText is the run's failure in words, naming the failed stage rather than its id.
	ErrorText string `json:"errorText"`
	// CanceledStageCount counts the stages the run's cancel stopped.
	CanceledStageCount int `json:"canceledStageCount"`
	// Duration is how long the run took, or has been going, in words.
	Duration     string          `json:"duration"`
	WorkflowName string          `json:"workflowName"`
	Components   []RunComponent  `json:"components"`
	Edges        []workflow.Edge `json:"edges"`
}

// RunComponent is a component of the run's workflow with the progress of its stages.
// Its config is left out: the graph does not need it, and configs can hold values (headers,
// URLs) a read-only member need not see in every page load.
type RunComponent struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Module   string            `json:"module"`
	Position workflow.Position `json:"position"`
	Attempts int               `json:"attempts"`
	// Status is the stage's status, or for a FOR_EACH body the status of its iterations
	// taken together; NOT_STARTED before the component has a stage.
	Status string      `json:"status"`
	Counts StageCounts `json:"counts"`
	// ForEach is the FOR_EACH component this one runs in, once per item.
	ForEach string `json:"forEach,omitempty"`
	// Iterations is the number of items of the FOR_EACH (of this component, or the one it runs
	// in) once known.
	Iterations *int `json:"iterations"`
	// IterationsDone counts the items whose whole body completed (FOR_EACH components only).
	IterationsDone *int `json:"iterationsDone,omitempty"`
}

// StageCounts counts a component's stages by status.
type StageCounts struct {
	Created   int `json:"created"`
	Running   int `json:"running"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// Canceled counts the failed stages the run's cancel stopped (included in Failed).
	Canceled int `json:"canceled"`
	// Skipped counts the stages no taken edge reached (included in Completed).
	Skipped int `json:"skipped"`
}

func (c StageCounts) total() int { return c.Created + c.Running + c.Completed + c.Failed }

// StatusNotStarted is the status of a component that has no stage (yet) in the run.
const StatusNotStarted = "NOT_STARTED"

// runGraphDetail renders st for the page.
func runGraphDetail(st *run.State) RunDetail {
	def := st.Definition
	g := def.Graph()
	out := RunDetail{Detail: st.Detail(), WorkflowName: def.Name, Components: make([]RunComponent, len(def.Components)),
		Edges: def.Edges, ErrorText: runErrorText(st), CanceledStageCount: canceledStages(st)}
	out.DisplayStatus = runLabel(out.Detail)
	if out.Edges == nil {
		out.Edges = []workflow.Edge{}
	}
	at := make(map[string]int, len(def.Components))
	for i, c := range def.Components {
		at[c.ID] = i
		out.Components[i] = RunComponent{ID: c.ID, Name: c.Name, Module: c.Module, Position: c.Position, Attempts: c.Attempts}
	}
	// FOR_EACH bodies: which loop each body component runs in, and the stage of each loop.
	bodyOf, bodySize := g.InnermostBodies(), map[string]int{}
	loopStage := map[string]run.Stage{}
	for _, f := range bodyOf {
		bodySize[f]++
	}
	for _, s := range st.Stages {
		i, ok := at[s.ComponentID]
		if !ok {
			continue
		}
		cnt := &out.Components[i].Counts
		switch s.Status {
		case run.StageStatusCreated:
			cnt.Created++
		case run.StageStatusRunning:
			cnt.Running++
		case run.StageStatusCompleted:
			cnt.Completed++
			if s.Skipped {
				cnt.Skipped++
			}
		case run.StageStatusFailed:
			cnt.Failed++
			if stageLabel(s.Status, s.Error) == StatusCanceled {
				cnt.Canceled++
			}
		}
		if s.Module == workflow.ModuleForEach && s.Iteration == run.NoIteration {
			loopStage[s.ComponentID] = s
		}
	}
	items := map[string]*int{}
	for id, s := range loopStage {
		if n, ok := forEachItems(st, g, g.Components[id]); ok {
			items[id] = &n
		}
		done := iterationsDone(st, s.ID, bodySize[id])
		out.Components[at[id]].IterationsDone = &done
	}
	for i := range out.Components {
		c := &out.Components[i]
		c.ForEach = bodyOf[c.ID]
		switch {
		case c.Module == workflow.ModuleForEach:
			c.Iterations = items[c.ID]
		case c.ForEach != "":
			c.Iterations = items[c.ForEach]
		}
		c.Status = componentStatus(*c, st.Status.Terminal())
	}
	return out
}

// componentStatus is the colour of a component: its one stage's status, or, for a FOR_EACH
// body (a stage per item), RUNNING while any iteration is open or items are still to come,
// then FAILED if any failed, else COMPLETED; CANCELED when every failure was the run's cancel,
// SKIPPED when every stage was skipped.
func componentStatus(c RunComponent, runEnded bool) string {
	n := c.Counts
	switch {
	case n.total() == 0:
		return StatusNotStarted
	case n.Running > 0:
		return string(run.StageStatusRunning)
	case n.Created > 0:
		return string(run.StageStatusCreated)
	case c.ForEach != "" && c.Iterations != nil && n.Completed+n.Failed < *c.Iterations && !runEnded:
		// Between admissions of a bounded-concurrency loop: still in progress.
		return string(run.StageStatusRunning)
	case n.Failed > 0 && n.Failed == n.Canceled:
		return StatusCanceled
	case n.Failed > 0:
		return string(run.StageStatusFailed)
	case n.Skipped == n.Completed:
		return StatusSkipped
	}
	return string(run.StageStatusCompleted)
}

// forEachItems is the number of items a FOR_EACH iterates over, read from its upstream's
// output as the run read it; false while that is not known (or not an array).
func forEachItems(st *run.State, g workflow.Graph, c workflow.Component) (int, bool) {
	in := g.In[c.ID]
	if len(in) != 1 {
		return 0, false
	}
	cfg, err := workflow.ParseForEach(c.Config)
	if err != nil {
		return 0, false
	}
	for _, s := range st.Stages {
		if s.ComponentID != in[0].From || s.Iteration != run.NoIteration || s.Status != run.StageStatusCompleted {
			continue
		}
		v, ok := workflow.Lookup(s.Output, cfg.Items)
		var items []json.RawMessage
		if !ok || json.Unmarshal(v, &items) != nil || items == nil {
			return 0, false
		}
		return len(items), true
	}
	return 0, false
}

// iterationsDone counts the iterations of a FOR_EACH stage whose every body stage completed.
func iterationsDone(st *run.State, loopStageID string, bodySize int) int {
	if bodySize == 0 {
		return 0
	}
	completed := map[int]int{}
	for _, s := range st.Stages {
		if s.ParentStageID == loopStageID && s.Status == run.StageStatusCompleted {
			completed[s.Iteration]++
		}
	}
	done := 0
	for _, n := range completed {
		if n >= bodySize {
			done++
		}
	}
	return done
}
