package workflow

import (
	"encoding/json"

	"github.com/switchyard/switchyard/domain"
)

// checkWebhookConfig checks an ON_WEBHOOK component's config.
func checkWebhookConfig(config json.RawMessage) error {
	return domain.Invalid("module", "%s is not available yet", ModuleOnWebhook)
}
