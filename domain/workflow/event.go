package workflow

import (
	"encoding/json"

	"github.com/switchyard/switchyard/domain"
)

// checkEventConfig checks an ON_EVENT component's config.
func checkEventConfig(config json.RawMessage) error {
	return domain.Invalid("module", "%s is not available yet", ModuleOnEvent)
}
