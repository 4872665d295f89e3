package console

import "github.com/switchyard/switchyard/domain/workflow"

// eventTrigger is an ON_EVENT component as the workflow page lists it.
type eventTrigger struct {
	ComponentID string
	workflow.EventConfig
}

// maxWindowsShown bounds the debounce windows the workflow page lists.
const maxWindowsShown = 50

// eventTriggers lists d's ON_EVENT components with their configs (a config that no longer
// parses is left out: the definition was checked when saved).
func eventTriggers(d workflow.Definition) []eventTrigger {
	var out []eventTrigger
	for _, c := range d.Components {
		if c.Module != workflow.ModuleOnEvent {
			continue
		}
		if cfg, err := workflow.ParseEvent(c.Config); err == nil {
			out = append(out, eventTrigger{ComponentID: c.ID, EventConfig: cfg})
		}
	}
	return out
}

// eventNotice fills d's event triggers and the debounce windows still gathering.
func (c *Console) eventNotice(q *request, d *workflowData) error {
	d.Events = eventTriggers(d.Workflow.Definition)
	if len(d.Events) == 0 {
		return nil
	}
	var err error
	d.Windows, err = c.q.OpenDebounceWindows(q.ctx(), q.ws.ID, d.Workflow.ID, maxWindowsShown)
	return err
}
