package workflow

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/switchyard/switchyard/domain"
)

// Bounds of a trigger's debounce (docs/workflows.md, "Debounce").
const (
	MinDebounceQuietMs   = 100
	MaxDebounceWaitMs    = 7 * 24 * 3600 * 1000
	DefaultDebounceItems = 100
	MaxDebounceItems     = 1000
	// MaxDebounceBytes bounds the payloads one debounced run gathers: a window that would pass
	// it starts its run first, and the payload opens the next window.
	MaxDebounceBytes = 1 << 20
)

// DebounceConfig gathers the deliveries of an ON_EVENT or ON_WEBHOOK trigger by key and starts
// one run per key once the key has been quiet for QuietMs, MaxWaitMs after its first delivery,
// or at MaxItems, whichever comes first; the run's trigger body is {"events": [payloads, in
// arrival order]}.
type DebounceConfig struct {
	// Key is an expression over the payload (its top-level fields as variables, the whole as
	// payload) whose value names the key; "" gathers every delivery under one key.
	Key string `json:"key,omitempty"`
	// QuietMs is how long a key must go without deliveries before its run starts (100 ms to
	// MaxWaitMs).
	QuietMs int64 `json:"quietMs"`
	// MaxWaitMs bounds how long after its first delivery a key's run starts however busy the
	// key stays (QuietMs to 7 days; default 10 x QuietMs, at most 7 days).
	MaxWaitMs int64 `json:"maxWaitMs,omitempty"`
	// MaxItems starts the run as soon as a key holds that many deliveries (1 to 1000; default
	// 100).
	MaxItems int `json:"maxItems,omitempty"`
}

func (c *DebounceConfig) setDefaults() {
	if c.MaxWaitMs == 0 {
		c.MaxWaitMs = min(10*c.QuietMs, MaxDebounceWaitMs)
	}
	if c.MaxItems == 0 {
		c.MaxItems = DefaultDebounceItems
	}
}

// Validate checks a defaulted config; field names start at "debounce".
func (c DebounceConfig) Validate() error {
	switch {
	case c.QuietMs < MinDebounceQuietMs || c.QuietMs > MaxDebounceWaitMs:
		return domain.Invalid("debounce.quietMs", "is required: milliseconds from %d to %d", MinDebounceQuietMs, MaxDebounceWaitMs)
	case c.MaxWaitMs < c.QuietMs || c.MaxWaitMs > MaxDebounceWaitMs:
		return domain.Invalid("debounce.maxWaitMs", "must be from quietMs (%d) to %d milliseconds", c.QuietMs, MaxDebounceWaitMs)
	case c.MaxItems < 1 || c.MaxItems > MaxDebounceItems:
		return domain.Invalid("debounce.maxItems", "must be from 1 to %d", MaxDebounceItems)
	case c.Key != "" && strings.TrimSpace(c.Key) == "":
		return domain.Invalid("debounce.key", "must be an expression, or left out to gather every delivery under one key")
	case len(c.Key) > MaxWhenLength:
		return domain.Invalid("debounce.key", "must be at most %d characters", MaxWhenLength)
	}
	return domain.CheckStorableString("debounce.key", c.Key)
}

// ParseDebounce reads the "debounce" field of a trigger's config: nil when there is none. The
// key's expression is compiled by ValidateConditions (the domain compiles nothing itself).
func ParseDebounce(config json.RawMessage) (*DebounceConfig, error) {
	var holder struct {
		Debounce json.RawMessage `json:"debounce"`
	}
	if err := json.Unmarshal(config, &holder); err != nil {
		return nil, domain.Invalid("config", "must be a JSON object")
	}
	if len(holder.Debounce) == 0 || string(holder.Debounce) == "null" {
		return nil, nil
	}
	var c DebounceConfig
	dec := json.NewDecoder(bytes.NewReader(holder.Debounce))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, domain.Invalid("debounce", `must be {"key": expression, "quietMs": n, "maxWaitMs": n, "maxItems": n}: %v`, err)
	}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
