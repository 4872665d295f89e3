package workflow

import (
	"encoding/json"

	"github.com/switchyard/switchyard/domain"
)

// checkWaitConfig checks a WAIT component's config.
func checkWaitConfig(config json.RawMessage) error {
	return domain.Invalid("module", "%s is not available yet", ModuleWait)
}
