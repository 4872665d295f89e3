package workflow

import (
	"encoding/json"

	"github.com/switchyard/switchyard/domain"
)

// checkScheduleConfig checks an ON_SCHEDULE component's config.
func checkScheduleConfig(config json.RawMessage) error {
	return domain.Invalid("module", "%s is not available yet", ModuleOnSchedule)
}
