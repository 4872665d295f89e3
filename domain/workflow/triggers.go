package workflow

import (
	"slices"
	"strings"
)

// The components a run can start from, and the durable wait. Like FOR_EACH they run no module:
// the scheduler (WAIT) or their own reactors (the triggers) resolve them.
const (
	// ModuleOnSchedule starts a run at each fire time of its cron or interval (schedule.go).
	ModuleOnSchedule = "ON_SCHEDULE"
	// ModuleOnEvent starts a run for each POST /v1/sdk/events of its name whose payload
	// passes its filter (event.go).
	ModuleOnEvent = "ON_EVENT"
	// ModuleOnWebhook starts a run for each signed delivery to its /hooks/{token} URL
	// (webhook.go).
	ModuleOnWebhook = "ON_WEBHOOK"
	// ModuleWait holds a stage RUNNING until a time, a signal or an approval (wait.go).
	ModuleWait = "WAIT"
)

// TriggerModules are the modules a run can start from: a definition needs one of them, and
// none of them may have incoming edges.
var TriggerModules = []string{ModuleTrigger, ModuleOnSchedule, ModuleOnEvent, ModuleOnWebhook}

// IsTrigger reports whether module starts runs.
func IsTrigger(module string) bool { return slices.Contains(TriggerModules, module) }

// triggerList names the trigger modules for error messages.
func triggerList() string { return strings.Join(TriggerModules, ", ") }

// TriggersOf lists the ids of d's components of module, in definition order.
func (d Definition) TriggersOf(module string) []string {
	var ids []string
	for _, c := range d.Components {
		if c.Module == module {
			ids = append(ids, c.ID)
		}
	}
	return ids
}
